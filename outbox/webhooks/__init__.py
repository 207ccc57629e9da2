"""Webhooks: publish events POSTed to operators' endpoints, signed, retried, bounded."""
