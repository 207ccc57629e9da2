"""The media library: every image with a thumbnail, searchable by its words, where each is
used, and an upload form; and the post page's upload, picker and featured-image addresses."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from media import access, rules, services, views
from media.models import FeaturedImage, Image, ImageUse
from publishing.models import Post


class UploadForm(forms.ModelForm):
    """The library's "Add image": a file and its alt text, stored by the same service."""

    file = forms.FileField(
        label="Image file",
        help_text="JPEG, PNG, GIF or WebP. Location and camera data are removed.",
    )

    class Meta:
        model = Image
        fields = ["alt"]

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.stored: Image | None = None

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload is not None and not self.errors:
            try:
                self.stored = services.store_image(
                    upload=upload, alt=cleaned.get("alt", ""), user=self.user
                )
            except rules.Refused as refused:
                raise forms.ValidationError(str(refused))
        return cleaned

    def save(self, commit=True):
        return self.stored


class UsedFilter(admin.SimpleListFilter):
    """Images some post uses (in its text or as its featured image), or none does: an image
    uploaded for a post that was never saved is only the editors' and may be deleted."""

    title = "use"
    parameter_name = "used"

    def lookups(self, request, model_admin):
        return [("yes", "Used in posts"), ("no", "Not used")]

    def queryset(self, request, queryset):
        used = Exists(ImageUse.objects.filter(image=OuterRef("pk"))) | Exists(
            FeaturedImage.objects.filter(image=OuterRef("pk"))
        )
        if self.value() == "yes":
            return queryset.filter(used)
        if self.value() == "no":
            return queryset.exclude(used)
        return queryset


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ["thumbnail", "alt", "original_name", "dimensions", "uploaded", "used_in"]
    list_display_links = ["thumbnail", "alt"]
    list_filter = [UsedFilter]
    search_fields = ["alt", "original_name"]
    list_per_page = 50
    show_full_result_count = False
    readonly_fields = [
        "preview",
        "markdown",
        "address",
        "original_name",
        "dimensions",
        "uploaded_by",
        "uploaded",
        "where_used",
    ]

    def get_queryset(self, request):
        # Posts whose text shows the image and posts it is featured on, each counted once.
        return (
            super()
            .get_queryset(request)
            .annotate(
                use_count=Count("uses", distinct=True),
                featured_count=Count("featured_in", distinct=True),
            )
        )

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["file", "alt"]
        return ["preview", "alt", "markdown", "address", *self.readonly_fields[3:]]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = UploadForm
            form = super().get_form(request, obj, change=change, fields=["alt"], **kwargs)

            class WithUser(form):
                def __init__(inner, *args, **kw):
                    super().__init__(*args, user=request.user, **kw)

            return WithUser
        return super().get_form(request, obj, change=change, **kwargs)

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)

    # The library is the editors': whoever may see posts sees it, whoever may change posts
    # adds images and edits their alt text, whoever may delete posts deletes unused images.
    def has_module_permission(self, request):
        return access.is_editor(request.user) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return access.is_editor(request.user) or super().has_view_permission(request, obj)

    def has_add_permission(self, request):
        return access.may_upload(request.user)

    def has_change_permission(self, request, obj=None):
        return access.may_upload(request.user) or super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and (obj.uses.exists() or obj.featured_in.exists()):
            return False
        user = request.user
        return (
            access.may_upload(user) and user.has_perm("publishing.delete_post")
        ) or super().has_delete_permission(request, obj)

    def delete_model(self, request, obj):
        services.delete_image(obj)

    def delete_queryset(self, request, queryset):
        kept = 0
        for image in queryset:
            if image.uses.exists() or image.featured_in.exists():
                kept += 1
            else:
                services.delete_image(image)
        if kept:
            messages.warning(request, f"{kept} image(s) are used by posts and were kept.")

    @admin.display(description="Image")
    def thumbnail(self, image):
        return format_html(
            '<img src="{}" alt="" style="max-width:120px;max-height:80px" loading="lazy">',
            image.thumbnail_url,
        )

    @admin.display(description="Image")
    def preview(self, image):
        return format_html('<img src="{}" alt="{}" style="max-width:480px">', image.url, image.alt)

    @admin.display(description="Size")
    def dimensions(self, image):
        return f"{image.width} × {image.height} px, {rules.megabytes(image.size)}"

    @admin.display(description="Markdown (copy into a post)")
    def markdown(self, image):
        return format_html("<code>{}</code>", image.markdown())

    @admin.display(description="Address")
    def address(self, image):
        return image.url

    @admin.display(description="Uploaded", ordering="uploaded_at")
    def uploaded(self, image):
        # The editor's own zone (editors' middleware activates it), with its name.
        return timezone.localtime(image.uploaded_at).strftime("%Y-%m-%d %H:%M %Z")

    @admin.display(description="Used in", ordering="use_count")
    def used_in(self, image):
        count = getattr(image, "use_count", 0)
        featured = getattr(image, "featured_count", 0)
        if not count and not featured:
            return "not used"
        words = [f"{count} post" if count == 1 else f"{count} posts"] if count else []
        if featured:
            words.append(f"featured on {featured} post" + ("" if featured == 1 else "s"))
        return ", ".join(words)

    @admin.display(description="Used in")
    def where_used(self, image):
        post_ids = set(ImageUse.objects.filter(image=image).values_list("post_id", flat=True))
        featured = set(FeaturedImage.objects.filter(image=image).values_list("post_id", flat=True))
        posts = Post.objects.filter(pk__in=post_ids | featured).order_by("title")
        if not posts:
            return "No post uses this image: only editors can see it."
        return format_html(
            '<ul style="margin:0;padding-left:1.2em">{}</ul>',
            format_html_join(
                "",
                '<li><a href="{}">{}</a> ({}{})</li>',
                (
                    (
                        reverse("admin:publishing_post_change", args=[post.pk]),
                        post.title,
                        post.get_status_display().lower(),
                        ", featured" if post.pk in featured else "",
                    )
                    for post in posts
                ),
            ),
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("upload/", wrap(views.upload), name="media_image_upload"),
            path("picker/", wrap(views.picker), name="media_image_picker"),
            path("featured/<int:post_id>/", wrap(views.featured), name="media_image_featured"),
            *super().get_urls(),
        ]
