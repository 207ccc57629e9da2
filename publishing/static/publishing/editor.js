/* The post page's editor (PostAdmin.Media): a Markdown toolbar and a live preview beside the
   body, a question before leaving the page with unsaved changes (closing the tab, or a link
   on the page), and a copy of the title and body kept in this browser as the editor types,
   offered back after a crash or a closed tab until the post is saved. */
(function () {
  "use strict";
  const PREFIX = "instatic:post-draft:";
  const SUBMITTED = "instatic:post-submitted";
  const LEAVE_QUESTION = "You have changes that are not saved. Leave this page and lose them?";
  const PREVIEW_PAUSE_MS = 400;

  function debounce(fn, ms) {
    let timer = null;
    return function () { clearTimeout(timer); timer = setTimeout(fn, ms); };
  }

  function csrf() {
    const input = document.querySelector("[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function storage() {
    try { return window.localStorage; } catch (e) { return null; }
  }

  /* Which form fields count as the editor's text and settings (not hidden bookkeeping). */
  function snapshot(form) {
    const values = [];
    for (const element of form.elements) {
      if (!element.name || element.type === "hidden" || element.type === "submit" || element.type === "file") continue;
      if ((element.type === "radio" || element.type === "checkbox") && !element.checked) continue;
      values.push(element.name + "=" + element.value);
    }
    return values.join("\n");
  }

  function setUp() {
    const body = document.getElementById("id_body");
    const form = body && body.form;
    if (!form) return;
    const title = document.getElementById("id_title");
    // Per person and page: another editor signing in on this browser is offered nothing.
    const who = document.querySelector("#user-tools strong");
    const key = PREFIX + (who ? who.textContent.trim() : "") + ":" + location.pathname;
    const store = storage();
    // Django's own form errors, or a colleague's change merged with the editor's (#merge, a
    // question rather than an error): the page came back from a save that did not happen.
    const failedSave = form.querySelector("p.errornote:not([hidden]):not(.images-error), ul.errorlist, #merge") !== null;
    let initial = snapshot(form);
    let submitting = false;

    /* A save sent from this page last time: it succeeded unless we are back on its form with errors. */
    const sent = sessionStorage.getItem(SUBMITTED);
    if (sent) {
      sessionStorage.removeItem(SUBMITTED);
      if (store && !(failedSave && sent === key)) store.removeItem(sent);
    }

    // Only the editor's own changes count: the page's other scripts fill some fields as it
    // loads (without the input events that typing and pasting send).
    let touched = false;
    form.addEventListener("input", () => { touched = true; }, true);
    form.addEventListener("change", () => { touched = true; }, true);
    const dirty = () => !submitting && (failedSave || (touched && snapshot(form) !== initial));

    /* Leaving: the browser's own question when the tab closes or reloads ... */
    window.addEventListener("beforeunload", (event) => {
      if (dirty()) { event.preventDefault(); event.returnValue = LEAVE_QUESTION; return LEAVE_QUESTION; }
      return undefined;
    });
    /* ... and ours for a link on the page (the breadcrumbs, the menu, "History"). */
    document.addEventListener("click", (event) => {
      const link = event.target.closest && event.target.closest("a[href]");
      if (!link || event.defaultPrevented || link.target === "_blank") return;
      const href = link.getAttribute("href");
      if (!href || href.startsWith("#") || href.startsWith("javascript:")) return;
      if (dirty() && !window.confirm(LEAVE_QUESTION)) {
        event.preventDefault();
        event.stopImmediatePropagation();
      } else if (dirty()) {
        submitting = true; /* answered already: no second question from beforeunload */
      }
    }, true);
    form.addEventListener("submit", () => {
      submitting = true;
      sessionStorage.setItem(SUBMITTED, key);
      if (store) saveLocal();
    });

    /* When a copy was kept, as the admin writes times: 2026-12-06 04:20 UTC (this browser's zone). */
    function keptAt(when) {
      const parts = {};
      new Intl.DateTimeFormat("en-CA", {
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
        hourCycle: "h23", timeZoneName: "short",
      }).formatToParts(when).forEach((part) => { parts[part.type] = part.value; });
      return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" + parts.minute + " " + (parts.timeZoneName || "");
    }

    /* The copy kept in this browser. */
    function saveLocal() {
      if (!store) return;
      const copy = { title: title ? title.value : "", body: body.value, at: new Date().toISOString() };
      try {
        if (snapshot(form) === initial && !failedSave) store.removeItem(key);
        else store.setItem(key, JSON.stringify(copy));
      } catch (e) { /* full or refused: the warning before leaving still protects the text */ }
    }
    // At every change, not after a pause: a crash right after a keystroke keeps it (a write
    // of the longest body takes about a millisecond).
    form.addEventListener("input", saveLocal);
    form.addEventListener("change", saveLocal);

    function offerRestore() {
      if (!store) return;
      // A colleague's change merged with the editor's: the form holds the editor's text
      // already; the kept copy becomes the merge, rather than a second question.
      if (form.querySelector("#merge")) { saveLocal(); return; }
      let copy = null;
      try { copy = JSON.parse(store.getItem(key) || "null"); } catch (e) { copy = null; }
      if (!copy || typeof copy.body !== "string") return;
      if (copy.body === body.value && (!title || copy.title === title.value)) { if (!failedSave) store.removeItem(key); return; }
      const note = document.createElement("div");
      note.className = "editor-restore";
      note.id = "editor-restore";
      note.setAttribute("role", "alert");
      const when = new Date(copy.at);
      const words = document.createElement("p");
      words.textContent = "This browser kept text you had not saved" +
        (isNaN(when) ? "" : " (" + keptAt(when) + ")") +
        ". Restore it into the form? Nothing is saved until you save.";
      const restore = document.createElement("button");
      restore.type = "button"; restore.className = "button default"; restore.id = "editor-restore-yes";
      restore.textContent = "Restore my unsaved text";
      const discard = document.createElement("button");
      discard.type = "button"; discard.className = "button"; discard.id = "editor-restore-no";
      discard.textContent = "Discard it";
      restore.addEventListener("click", () => {
        if (title && typeof copy.title === "string") title.value = copy.title;
        body.value = copy.body;
        body.dispatchEvent(new Event("input", { bubbles: true }));
        note.remove();
      });
      discard.addEventListener("click", () => { store.removeItem(key); note.remove(); });
      note.append(words, restore, discard);
      form.parentNode.insertBefore(note, form);
    }
    offerRestore();

    /* The toolbar and the live preview. */
    const wrap = document.createElement("div");
    wrap.className = "editor-wrap";
    const column = document.createElement("div");
    column.className = "editor-column";
    const toolbar = document.createElement("div");
    toolbar.className = "editor-toolbar";
    toolbar.setAttribute("role", "toolbar");
    toolbar.setAttribute("aria-label", "Formatting");
    const preview = document.createElement("div");
    preview.className = "editor-preview";
    preview.id = "editor-preview";
    preview.setAttribute("aria-live", "polite");
    const previewHeading = document.createElement("p");
    previewHeading.className = "editor-preview-label";
    previewHeading.textContent = "Preview (as the public page shows it)";
    const previewBody = document.createElement("div");
    previewBody.className = "editor-preview-body";
    previewBody.id = "editor-preview-body";
    preview.append(previewHeading, previewBody);
    body.parentNode.insertBefore(wrap, body);
    column.append(toolbar, body);
    wrap.append(column, preview);

    function surround(before, after, placeholder) {
      const start = body.selectionStart, end = body.selectionEnd;
      const chosen = body.value.slice(start, end) || placeholder;
      body.setRangeText(before + chosen + after, start, end, "end");
      body.setSelectionRange(start + before.length, start + before.length + chosen.length);
      body.focus();
      body.dispatchEvent(new Event("input", { bubbles: true }));
    }
    function prefixLines(prefix) {
      const start = body.value.lastIndexOf("\n", body.selectionStart - 1) + 1;
      const end = body.selectionEnd;
      const lines = body.value.slice(start, end).split("\n").map((line) => prefix + line).join("\n");
      body.setRangeText(lines, start, end, "end");
      body.focus();
      body.dispatchEvent(new Event("input", { bubbles: true }));
    }
    const tools = [
      ["Bold", "B", () => surround("**", "**", "bold text")],
      ["Italic", "I", () => surround("_", "_", "italic text")],
      ["Link", "Link", () => surround("[", "](https://)", "link text")],
      ["Heading", "H", () => prefixLines("## ")],
      ["List", "• List", () => prefixLines("- ")],
      ["Image", "Image", () => {
        const chooser = document.getElementById("images-choose");
        if (chooser) { chooser.click(); } else { surround("![", "](/media/…)", "what the image shows"); }
      }],
    ];
    for (const [label, text, action] of tools) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button editor-tool";
      button.textContent = text;
      button.title = label;
      button.setAttribute("aria-label", label);
      button.dataset.tool = label.toLowerCase();
      button.addEventListener("click", action);
      toolbar.append(button);
    }

    const url = body.dataset.livePreviewUrl;
    let asked = 0;
    async function refresh() {
      if (!url) return;
      const number = ++asked;
      const data = new FormData();
      data.append("body", body.value);
      try {
        const response = await fetch(url, {
          method: "POST", body: data, credentials: "same-origin", headers: { "X-CSRFToken": csrf() },
        });
        const answer = await response.json();
        if (number !== asked) return; /* a newer one is on its way */
        if (answer.error) {
          previewBody.textContent = "";
          const note = document.createElement("p");
          note.className = "errornote";
          note.textContent = answer.error;
          previewBody.append(note);
        } else {
          previewBody.innerHTML = answer.html; /* sanitized by the site's renderer */
        }
      } catch (e) {
        if (number === asked) previewBody.textContent = "The preview could not be shown just now.";
      }
    }
    body.addEventListener("input", debounce(refresh, PREVIEW_PAUSE_MS));
    refresh();
    initial = snapshot(form);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
