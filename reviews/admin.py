"""The reviews' admin: the queue, a review's page with its content and the decision, and the
pages that submit a post or a revision for review (shown only when reviews are required).

Nothing here decides by itself: the buttons call :mod:`reviews.actions`.
"""

from functools import partial

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _

from coordination.wording import local_time
from publishing.admin.columns import badge
from publishing.diffs import revision_diff
from publishing.exceptions import PublishingError
from publishing.models import Post
from publishing.rendering import render
from reviews import actions as reviews
from reviews.models import Review

RV = Review.Status
BADGE_COLOURS = {
    RV.PENDING: "#9a6700",
    RV.APPROVED: "#1a7f37",
    RV.REJECTED: "#cf222e",
    RV.WITHDRAWN: "#57606a",
}


class DecisionForm(forms.Form):
    comment = forms.CharField(
        label=_("Comment for the author"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )


class SubmitForm(forms.Form):
    note = forms.CharField(
        label=_("Note to the reviewer"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )


class RevisionSubmitForm(SubmitForm):
    title = forms.CharField(label=_("Title"), max_length=200)
    body = forms.CharField(label=_("Body"), widget=forms.Textarea(attrs={"rows": 14}))


def _may_see(request) -> bool:
    user = request.user
    return reviews.can_review(user) or user.has_perm("publishing.change_post")


class ReviewAdmin(admin.ModelAdmin):
    """The review queue: newest first, pending ones easy to find (filter by status)."""

    list_display = ["title", "target", "status_badge", "submitted_by", "submitted", "decided_by"]
    list_filter = ["status", "target"]
    search_fields = ["title"]
    change_form_template = "admin/reviews/review/change_form.html"

    def has_module_permission(self, request):
        return reviews.required() and _may_see(request)

    def has_view_permission(self, request, obj=None):
        return _may_see(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("submitted_by", "decided_by")

    @admin.display(description=_("Status"), ordering="status")
    def status_badge(self, review: Review) -> str:
        return badge(
            "review-status",
            review.status,
            BADGE_COLOURS[review.status],
            review.get_status_display(),
        )

    @admin.display(description=_("Submitted"), ordering="submitted_at")
    def submitted(self, review: Review) -> str:
        return local_time(review.submitted_at, seconds=False)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        review = self.get_object(request, object_id)
        extra = {}
        if review is not None:
            problem = reviews.decision_problem_for(review, request.user)
            extra = {
                "review": review,
                "content": _content(review),
                "decide_url": reverse("admin:reviews_review_decide", args=[review.pk]),
                "may_decide": not problem,
                "why_not": problem,
                "decision_form": DecisionForm(),
                "current": reviews.is_current(review),
            }
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    def get_urls(self):
        def view(func, **kwargs):
            return self.admin_site.admin_view(partial(func, self, **kwargs))

        return [
            path("<int:object_id>/decide/", view(decide_view), name="reviews_review_decide"),
            path(
                "submit/post/<int:post_id>/",
                view(submit_view, what="post"),
                name="reviews_review_submit",
            ),
            path(
                "submit/revision/<int:post_id>/",
                view(submit_view, what="revision"),
                name="reviews_review_submit_revision",
            ),
            *super().get_urls(),
        ]


def _content(review: Review) -> dict:
    """Return what the reviewer reads: the content as it was submitted (its snapshot), and
    what differs from it now; for content another app submits, what that app shows."""
    other = reviews.subject(review.target)
    if other is not None:
        return other.content(review)
    live = _live_text(review)
    snapshot = review.snapshot
    if not snapshot:
        # Submitted before copies were kept: the content now is shown only if it is the same.
        if live is None or not reviews.is_current(review):
            return {"not_kept": True}
        snapshot = {"title": live[0], "body": live[1]}
    content = {
        "title": snapshot["title"],
        "html": render(snapshot["body"]).html,
        "slug": snapshot.get("slug", ""),
    }
    if review.target == Review.Target.REVISION and review.post is not None:
        post = review.post
        content["against_live"] = revision_diff(
            old_title=post.title, old_body=post.body, **_new(snapshot)
        )
    elif live is not None and not reviews.is_current(review):
        content["since"] = revision_diff(
            old_title=snapshot["title"],
            old_body=snapshot["body"],
            new_title=live[0],
            new_body=live[1],
        )
    return content


def _new(snapshot: dict) -> dict:
    return {"new_title": snapshot["title"], "new_body": snapshot["body"]}


def _live_text(review: Review) -> tuple[str, str] | None:
    """Return the title and body of what ``review`` is about as it is now, if it still is."""
    source = review.revision if review.revision_id else review.post
    return (source.title, source.body) if source is not None else None


def decide_view(model_admin, request, object_id: int):
    """Approve or reject a review (POST), then show it again."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    review = get_object_or_404(Review, pk=object_id)
    form = DecisionForm(request.POST)
    form.is_valid()
    approve = "_approve" in request.POST
    try:
        reviews.decide(
            review=review,
            user=request.user,
            approve=approve,
            comment=form.cleaned_data.get("comment", ""),
        )
    except (PublishingError, PermissionDenied) as refused:
        messages.error(request, str(refused))
    else:
        done = _("Approved: it can be scheduled or published now.") if approve else _("Rejected.")
        messages.success(request, done)
    return HttpResponseRedirect(reverse("admin:reviews_review_change", args=[review.pk]))


def _submit_post(post: Post, data: dict, user) -> str:
    reviews.submit_post(post=post, user=user, note=data["note"])
    return reverse("admin:publishing_post_change", args=[post.pk])


def _submit_revision(post: Post, data: dict, user) -> str:
    reviews.submit_revision(
        post=post, title=data["title"], body=data["body"], user=user, note=data["note"]
    )
    return reverse("admin:publishing_post_revisions", args=[post.pk])


#: What each submit page asks for, its title, and what it does with the answer.
SUBMITS = {
    "post": (SubmitForm, _("Submit “%(title)s” for review"), _submit_post),
    "revision": (
        RevisionSubmitForm,
        _("Submit a revision of “%(title)s” for review"),
        _submit_revision,
    ),
}


def submit_view(model_admin, request, post_id: int, what: str):
    """Ask for a note (and, for a revision, the new title and body), then submit (POST)."""
    post = get_object_or_404(Post, pk=post_id)
    if not request.user.has_perm("publishing.change_post"):
        raise PermissionDenied
    form_class, title, submit = SUBMITS[what]
    data = request.POST if request.method == "POST" else None
    form = form_class(data, initial={"title": post.title, "body": post.body})
    if request.method == "POST" and form.is_valid():
        try:
            done_url = submit(post, form.cleaned_data, request.user)
        except PublishingError as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, _("Submitted for review: the reviewers have been told."))
            return HttpResponseRedirect(done_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": Review._meta,
        "title": title % {"title": post},
        "post": post,
        "form": form,
        "change_url": reverse("admin:publishing_post_change", args=[post.pk]),
    }
    return TemplateResponse(request, "admin/reviews/review/submit.html", context)


def review_section(request, post):
    """The post page's "Review" section, when reviews are required: where the post is."""
    if not reviews.required() or post is None:
        return None
    live = post.status == Post.Status.PUBLISHED
    latest = reviews.latest(
        post=post, target=Review.Target.REVISION if live else Review.Target.POST
    )
    context = {
        "post": post,
        "latest": latest,
        "current": reviews.is_current(latest) if latest else False,
        "live": live,
        "submit_url": reverse(
            "admin:reviews_review_submit_revision" if live else "admin:reviews_review_submit",
            args=[post.pk],
        ),
    }
    return render_to_string("admin/reviews/review/post_section.html", context, request=request)


admin.site.register(Review, ReviewAdmin)
