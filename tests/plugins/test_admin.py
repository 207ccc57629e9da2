"""The plugin admin through the test client: actions, who-did-what, notices, run history."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.urls import reverse

from coordination.clock import database_now
from coordination.models import JobRun, JobState, Node
from plugins.models import ControlEvent, PluginState

pytestmark = pytest.mark.django_db

A = ControlEvent.Action
PLUGINS_URL = reverse("admin:plugins_pluginstate_changelist")
JOBS_URL = reverse("admin:plugins_pluginjob_changelist")
RUNS_URL = reverse("admin:plugins_pluginrun_changelist")


def state(name: str, group: str = "plugins", **values) -> JobState:
    values.setdefault("schedule", "every 1s")
    values.setdefault("next_due", database_now() + timedelta(minutes=5))
    return JobState.objects.create(name=name, group=group, **values)


def post_action(client, url: str, action: str, *pks):
    return client.post(url, {"action": action, "_selected_action": list(pks)}, follow=True)


def audit() -> list[tuple[str, str, str]]:
    return list(ControlEvent.objects.order_by("id").values_list("username", "action", "target"))


def test_plugins_are_listed_and_enabled_or_disabled_with_an_audit_row(operator_client, operator):
    state("example.beat", paused=True, paused_reason="paused by ann")
    state("example.digest")
    response = operator_client.get(PLUGINS_URL)
    assert response.status_code == 200
    listed = set(PluginState.objects.values_list("app_label", flat=True))
    assert {"example", "run_retention"} <= listed

    example = PluginState.objects.get(app_label="example")
    response = post_action(operator_client, PLUGINS_URL, "disable_plugins", example.pk)
    assert "Plugin example disabled; 1 job(s) paused." in response.content.decode()
    example.refresh_from_db()
    assert not example.enabled and example.changed_by == operator and example.changed_at
    digest = JobState.objects.get(name="example.digest")
    assert digest.paused and digest.paused_reason == "plugin disabled"

    post_action(operator_client, PLUGINS_URL, "enable_plugins", example.pk)
    assert not JobState.objects.get(name="example.digest").paused
    assert JobState.objects.get(name="example.beat").paused_reason == "paused by ann"
    assert audit() == [
        ("operator", A.PLUGIN_DISABLED, "example"),
        ("operator", A.PLUGIN_ENABLED, "example"),
    ]
    response = operator_client.get(reverse("admin:plugins_controlevent_changelist"))
    assert "disabled plugin" in response.content.decode()


def test_jobs_are_paused_resumed_and_run_now_from_the_admin(operator_client):
    state("example.digest")
    state("publishing.publish_due", group="publishing")
    response = operator_client.get(JOBS_URL)
    page = response.content.decode()
    assert "example.digest" in page and "publishing.publish_due" not in page

    post_action(operator_client, JOBS_URL, "pause_jobs", "example.digest")
    job = JobState.objects.get(name="example.digest")
    assert job.paused and job.paused_reason == "paused by operator"
    post_action(operator_client, JOBS_URL, "run_jobs_now", "example.digest")
    job.refresh_from_db()
    assert job.run_requested_at is not None and job.run_requested_by == "operator"
    post_action(operator_client, JOBS_URL, "resume_jobs", "example.digest")
    assert not JobState.objects.get(name="example.digest").paused
    assert audit() == [
        ("operator", A.JOB_PAUSED, "example.digest"),
        ("operator", A.JOB_RUN_REQUESTED, "example.digest"),
        ("operator", A.JOB_RESUMED, "example.digest"),
    ]
    detail = operator_client.get(reverse("admin:plugins_pluginjob_change", args=["example.digest"]))
    text = detail.content.decode()
    assert "requested a run now" in text and "paused job" in text and "operator" in text


def test_a_refused_action_is_explained(operator_client, operator):
    state("example.digest")
    from plugins import services

    services.set_plugin_enabled(plugin="example", enabled=False, user=operator)
    response = post_action(operator_client, JOBS_URL, "resume_jobs", "example.digest")
    assert "enable the plugin instead" in response.content.decode()
    assert JobState.objects.get(name="example.digest").paused


def test_users_without_the_control_permission_see_but_cannot_act(client, viewer):
    state("example.digest")
    client.force_login(viewer)
    response = client.get(JOBS_URL)
    assert response.status_code == 200 and "example.digest" in response.content.decode()
    assert "run_jobs_now" not in response.content.decode()
    post_action(client, JOBS_URL, "pause_jobs", "example.digest")
    assert not JobState.objects.get(name="example.digest").paused
    assert not ControlEvent.objects.exists()


def test_a_job_that_paused_itself_is_flagged(operator_client):
    state(
        "example.digest",
        paused=True,
        paused_reason="paused after 5 failures in a row",
        consecutive_failures=5,
        last_status="failed",
        last_error="Traceback ...\nValueError: the feed is down",
    )
    page = operator_client.get(JOBS_URL).content.decode()
    assert "paused itself after failing 5 times in a row" in page
    assert "paused after failures" in page
    detail = operator_client.get(reverse("admin:plugins_pluginjob_change", args=["example.digest"]))
    assert "ValueError: the feed is down" in detail.content.decode()


def test_nodes_that_declare_different_jobs_are_reported(operator_client):
    state("example.digest")
    state("extra.ping")
    common = ["example.beat", "example.digest"]
    for name, declared, fingerprint in [
        ("node-old", common, "aaaa"),
        ("node-new", [*common, "extra.ping"], "bbbb"),
    ]:
        Node.objects.create(
            name=name,
            instance=name,
            host="h",
            pid=1,
            started_at=Now(),
            last_heartbeat=Now(),
            declared_jobs=declared,
            jobs_fingerprint=fingerprint,
        )
    page = operator_client.get(JOBS_URL).content.decode()
    assert "Running schedulers declare different jobs" in page
    assert "Scheduler (node node-new) (bbbb): also declares extra.ping" in page
    assert "Scheduler (node node-old) (aaaa): lacks extra.ping" in page
    assert 'only <span class="scheduler" title="node-new"' in page
    Node.objects.filter(name="node-new").update(stopped_at=Now())
    assert "declare different jobs" not in operator_client.get(JOBS_URL).content.decode()


def test_run_history_per_job_with_status_node_duration_and_error(operator_client, admin_client):
    state("example.digest")
    state("example.beat")
    state("publishing.publish_due", group="publishing")
    now = database_now()
    JobRun.objects.create(
        job="example.digest",
        slot=now - timedelta(days=1),
        status=JobRun.Status.FAILED,
        node="node-a",
        duration=1.25,
        error="Traceback (most recent call last):\nKeyError: 'missing-feed'",
    )
    JobRun.objects.create(
        job="example.beat", slot=now, status=JobRun.Status.SUCCEEDED, node="node-b", duration=0.01
    )
    JobRun.objects.create(job="publishing.publish_due", slot=now, status=JobRun.Status.SUCCEEDED)

    page = operator_client.get(RUNS_URL, {"job": "example.digest"}).content.decode()
    assert "Scheduler (node node-a)" in page and "KeyError: &#x27;missing-feed&#x27;" in page
    assert '<td class="field-took"><span style="white-space:nowrap">1.2 s</span></td>' in page
    assert "node-b" not in page
    page = operator_client.get(RUNS_URL, {"status__exact": "succeeded"}).content.decode()
    assert "node-b" in page and "publishing.publish_due" not in page
    run = JobRun.objects.get(job="example.digest")
    detail = operator_client.get(reverse("admin:plugins_pluginrun_change", args=[run.pk]))
    assert "Traceback (most recent call last)" in detail.content.decode()
    # The engine's own read-only admin of the same rows still works beside this one.
    page = admin_client.get(reverse("admin:coordination_jobrun_changelist")).content.decode()
    assert "publishing.publish_due" in page and "example.digest" in page


def test_missed_runs_show_why_they_were_missed(operator_client):
    state("example.digest")
    now = database_now()
    for seconds, reason in ((1, "downtime"), (2, "plugin disabled")):
        JobRun.objects.create(
            job="example.digest",
            slot=now - timedelta(seconds=seconds),
            status=JobRun.Status.MISSED,
            reason=reason,
        )
    page = operator_client.get(RUNS_URL, {"reason__exact": "plugin disabled"}).content.decode()
    assert "plugin disabled" in page and page.count('class="field-outcome"') == 1


def test_jobs_of_other_groups_get_the_same_controls_and_audit(operator_client):
    group_jobs = reverse("admin:plugins_groupjob_changelist")
    state("example.digest")
    state("reports.weekly", group="reports")
    page = operator_client.get(group_jobs).content.decode()
    assert "reports.weekly" in page and "example.digest" not in page
    assert reverse("admin:coordination_jobstate_timeline", args=["reports.weekly"]) in page

    post_action(operator_client, group_jobs, "pause_jobs", "reports.weekly")
    assert JobState.objects.get(name="reports.weekly").paused
    post_action(operator_client, group_jobs, "run_jobs_now", "reports.weekly")
    post_action(operator_client, group_jobs, "resume_jobs", "reports.weekly")
    job = JobState.objects.get(name="reports.weekly")
    assert not job.paused and job.run_requested_by == "operator"
    assert audit() == [
        ("operator", A.JOB_PAUSED, "reports.weekly"),
        ("operator", A.JOB_RUN_REQUESTED, "reports.weekly"),
        ("operator", A.JOB_RESUMED, "reports.weekly"),
    ]
