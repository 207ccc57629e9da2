/* The post page's Images section (media/post_section.py): upload an image chosen or dropped,
   ask for its alt text, insert its Markdown into the body where the cursor was, reuse images
   from the library and choose the featured image, on a saved post's page and a new one's.
   The body gets an "input" event after each insert, so the page knows it has unsaved
   changes. */
(function () {
  "use strict";
  const panel = document.getElementById("images-panel");
  const body = document.getElementById("id_body");
  if (!panel || !body) return;
  // Beside the body it serves, not at the foot of the page.
  const row = body.closest(".form-row");
  if (row) row.after(panel);
  const $ = (id) => document.getElementById(id);
  const csrf = () => (document.querySelector("[name=csrfmiddlewaretoken]") || {}).value || "";
  let pending = null; // the file waiting for its alt text
  let caret = null; // where in the body it goes

  function say(text) { $("images-status").textContent = text; }
  function fail(text) {
    const box = $("images-error");
    box.textContent = text;
    box.hidden = !text;
  }

  function insert(markdown) {
    const at = caret !== null ? caret : body.selectionStart;
    const before = body.value.slice(0, at);
    const after = body.value.slice(at);
    // A paragraph of its own: two line ends before and after it, counting those there.
    const ending = before.match(/\n{0,2}$/)[0].length;
    const starting = after.match(/^\n{0,2}/)[0].length;
    const lead = before ? "\n\n".slice(ending) : "";
    const trail = "\n\n".slice(starting);
    body.value = before + lead + markdown + trail + after;
    const end = (before + lead + markdown).length;
    body.focus();
    body.setSelectionRange(end, end);
    caret = null;
    body.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function choose(file, position) {
    fail("");
    pending = file;
    caret = position;
    $("images-file-name").textContent = file.name;
    $("images-alt").value = "";
    $("images-describe").hidden = false;
    $("images-alt").focus();
  }

  async function upload() {
    const alt = $("images-alt").value.trim();
    if (!alt) {
      fail("Describe the image in a few words (its alt text): people who cannot see it read this instead.");
      $("images-alt").focus();
      return;
    }
    const data = new FormData();
    data.append("file", pending);
    data.append("alt", alt);
    say("Uploading " + pending.name + "…");
    $("images-upload").disabled = true;
    try {
      const response = await fetch(panel.dataset.uploadUrl, {
        method: "POST", body: data, credentials: "same-origin",
        headers: { "X-CSRFToken": csrf() },
      });
      let answer = {};
      try { answer = await response.json(); } catch (e) { answer = {}; }
      if (!response.ok) {
        fail(answer.error || "The upload failed (" + response.status + "). Try again.");
        say("");
        return;
      }
      insert(answer.image.markdown);
      $("images-describe").hidden = true;
      pending = null;
      say("Inserted “" + answer.image.alt + "” into the body.");
      load($("images-search").value);
    } catch (e) {
      fail("The upload failed: the site could not be reached. Try again.");
      say("");
    } finally {
      $("images-upload").disabled = false;
    }
  }

  // A saved post's featured image changes at once; a new post's is kept in the form's
  // field and becomes the post's when the post is first saved.
  async function feature(image) {
    const kept = $("images-featured-key");
    if (kept) {
      kept.value = image ? image.key : "";
      showFeatured(image, " when you save the post");
      return;
    }
    const data = new FormData();
    data.append("key", image ? image.key : "");
    const response = await fetch(panel.dataset.featuredUrl, {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "X-CSRFToken": csrf() },
    });
    if (!response.ok) { fail("The featured image could not be changed (" + response.status + ")."); return; }
    const answer = await response.json();
    showFeatured(answer.image, "");
  }

  function showFeatured(image, when) {
    const current = $("images-featured-current");
    current.textContent = "";
    if (image) {
      const img = document.createElement("img");
      img.src = image.thumbnail; img.alt = image.alt;
      const words = document.createElement("span"); words.textContent = " " + image.alt + " ";
      const remove = document.createElement("button");
      remove.type = "button"; remove.className = "button"; remove.id = "images-featured-remove";
      remove.textContent = "Remove";
      current.append(img, words, remove);
      say("“" + image.alt + "” is the featured image" + when + ".");
    } else {
      const none = document.createElement("span"); none.className = "help";
      none.textContent = "None: choose one below with “Feature”.";
      current.append(none);
      say(when ? "No featured image is chosen." : "The post has no featured image now.");
    }
  }

  async function load(query) {
    const url = panel.dataset.pickerUrl + "?q=" + encodeURIComponent(query || "");
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const answer = await response.json();
    const list = $("images-list");
    list.textContent = "";
    for (const image of answer.images) {
      const item = document.createElement("li");
      const img = document.createElement("img");
      img.src = image.thumbnail; img.alt = ""; img.loading = "lazy";
      const words = document.createElement("span"); words.textContent = image.alt;
      const add = document.createElement("button");
      add.type = "button"; add.className = "button"; add.textContent = "Insert";
      add.addEventListener("mousedown", () => { caret = body.selectionStart; });
      add.addEventListener("click", () => insert(image.markdown));
      const star = document.createElement("button");
      star.type = "button"; star.className = "button"; star.textContent = "Feature";
      star.addEventListener("click", () => feature(image));
      item.append(img, words, add, star);
      list.append(item);
    }
    if (!answer.images.length) {
      const item = document.createElement("li"); item.className = "help";
      item.textContent = query ? "No image matches." : "No images yet.";
      list.append(item);
    }
  }

  function firstImage(transfer) {
    for (const file of (transfer && transfer.files) || []) {
      return file;
    }
    return null;
  }

  $("images-choose").addEventListener("click", () => { caret = body.selectionStart; $("images-file").click(); });
  $("images-file").addEventListener("change", (event) => {
    const file = event.target.files[0];
    if (file) choose(file, caret);
    event.target.value = "";
  });
  $("images-upload").addEventListener("click", upload);
  $("images-cancel").addEventListener("click", () => { pending = null; $("images-describe").hidden = true; fail(""); });
  $("images-alt").addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); upload(); }
  });
  panel.addEventListener("click", (event) => {
    if (event.target.id === "images-featured-remove") feature(null);
  });
  let searchTimer = null;
  $("images-search").addEventListener("input", (event) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => load(event.target.value), 250);
  });
  $("images-search").addEventListener("keydown", (event) => {
    if (event.key === "Enter") event.preventDefault();
  });
  for (const target of [body, $("images-drop")]) {
    target.addEventListener("dragover", (event) => {
      if (event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) {
        event.preventDefault();
        target.classList.add("images-dragging");
      }
    });
    target.addEventListener("dragleave", () => target.classList.remove("images-dragging"));
    target.addEventListener("drop", (event) => {
      const file = firstImage(event.dataTransfer);
      target.classList.remove("images-dragging");
      if (!file) return;
      event.preventDefault();
      choose(file, target === body ? body.selectionStart : caret);
      panel.scrollIntoView({ block: "nearest" });
    });
  }
  load("");
})();
