"""Images in posts: uploads, their sizes, the media library, and the embargo that keeps an
image private until a post using it is live (docs/media.md)."""
