"use strict";
// Dataset upload: drag and drop or pick a file, send it to the API's multipart endpoint with a
// progress bar, follow its ingestion on a worker (validation, scan, deduplication) with the same bar,
// then open the dataset page; a refused file lists its problems with line numbers.
(function () {
  const td = window.tunedeck;
  const form = document.getElementById("upload-form");
  const zone = document.getElementById("drop-zone");
  const input = document.getElementById("upload-file");
  const progress = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  const issuesBox = document.getElementById("upload-issues");
  const maxBytes = Number(form.dataset.maxBytes);
  // The user's datasets by name ({id, versions}): a taken name is offered as a new version of that dataset.
  const existing = JSON.parse(form.dataset.existing || "{}");
  const nameInput = document.getElementById("upload-name");
  const existingBox = document.getElementById("upload-existing");
  const asVersion = document.getElementById("upload-as-version");
  const submitButton = document.getElementById("upload-submit");
  let chosen = null;

  function taken() {
    const name = nameInput.value.trim();
    return Object.prototype.hasOwnProperty.call(existing, name) ? existing[name] : null;
  }

  function showTaken() {
    td.setFieldError("upload-name", "");  // an earlier complaint about the name no longer applies
    const match = taken();
    existingBox.hidden = !match;
    if (!match) { asVersion.checked = false; submitButton.textContent = "Upload"; return; }
    const name = nameInput.value.trim();
    document.getElementById("upload-existing-text").textContent = "You already have a dataset named “" + name + "” ("
      + match.versions + " version" + (match.versions === 1 ? "" : "s") + "). Upload this file as its version "
      + (match.versions + 1) + ", or choose another name.";
    document.getElementById("upload-as-version-label").textContent = "Upload as version " + (match.versions + 1)
      + " of “" + name + "”";
    submitButton.textContent = asVersion.checked ? "Upload as a new version" : "Upload";
  }
  nameInput.addEventListener("input", showTaken);
  asVersion.addEventListener("change", showTaken);

  function choose(file) {
    chosen = file || null;
    document.getElementById("upload-file-name").textContent = chosen ? chosen.name + " (" + chosen.size + " bytes)" : "No file chosen.";
  }

  input.addEventListener("change", function () { choose(input.files[0]); });
  ["dragenter", "dragover"].forEach(function (kind) {
    zone.addEventListener(kind, function (event) { event.preventDefault(); zone.classList.add("dragging"); });
  });
  ["dragleave", "drop"].forEach(function (kind) {
    zone.addEventListener(kind, function () { zone.classList.remove("dragging"); });
  });
  zone.addEventListener("drop", function (event) {
    event.preventDefault();
    if (event.dataTransfer && event.dataTransfer.files.length) choose(event.dataTransfer.files[0]);
  });

  function showIssues(issues) {
    const body = issuesBox.querySelector("tbody");
    body.textContent = "";
    issues.forEach(function (issue) {
      const row = document.createElement("tr");
      [issue.line || "—", issue.field || "—", issue.message.replace(/^line \d+: /, ""), issue.found || ""].forEach(function (text) {
        const cell = document.createElement("td"); cell.textContent = String(text); row.appendChild(cell);
      });
      body.appendChild(row);
    });
    issuesBox.hidden = !issues.length;
  }

  // What the worker is doing with the upload, and how far through the file it is.
  const PHASES = { queued: "Waiting for a worker…", receiving: "A worker is reading the upload…", validating: "Validating, scanning and deduplicating rows…", storing: "Storing the dataset…" };
  function showIngestion(phase, detail) {
    status.textContent = PHASES[phase] || phase;
    if (detail && detail.total) {
      progress.value = Math.round(100 * detail.done / detail.total);
      status.textContent += " " + progress.value + "%";
    }
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    td.clearErrors(form);
    showIssues([]);
    if (!chosen) { status.textContent = "Choose a file first."; input.focus(); return; }
    if (maxBytes && chosen.size > maxBytes) { status.textContent = "The file is larger than the server accepts (" + maxBytes + " bytes)."; return; }
    const name = nameInput;
    if (name.value && !name.checkValidity()) {
      // The browser's own message (from the pattern), then the rule in words.
      td.setFieldError("upload-name", name.validationMessage
        + " Letters, digits, dot, dash and underscore; start with a letter or digit.");
      name.focus();
      return;
    }
    const match = taken();
    if (match && !asVersion.checked) {
      td.setFieldError("upload-name", "This name is taken: choose another name, or tick “upload as a new version”.");
      asVersion.focus();
      return;
    }
    const body = new FormData();
    // A new version keeps its dataset's name: the name goes only with a new dataset.
    if (name.value.trim() && !match) body.append("name", name.value.trim());
    body.append("format", document.getElementById("upload-format").value);
    body.append("scan_policy", document.getElementById("upload-scan-policy").value);
    // Optional text fields go only when filled: an empty one means "none", not an empty name.
    [["upload-label-column", "label_column"], ["upload-column-map", "column_map"], ["upload-licence", "licence"],
     ["upload-rights-note", "rights_note"]].forEach(function (pair) {
      const value = document.getElementById(pair[0]).value.trim();
      if (value) body.append(pair[1], value);
    });
    if (document.getElementById("upload-drop-invalid").checked) body.append("drop_invalid", "true");
    body.append("file", chosen, chosen.name);
    const request = new XMLHttpRequest();
    request.open("POST", match ? "/api/v1/datasets/" + encodeURIComponent(match.id) + "/versions" : "/api/v1/datasets");
    request.setRequestHeader("X-CSRF-Token", td.csrfToken());
    request.setRequestHeader("Accept", "application/json");
    progress.hidden = false;
    progress.value = 0;
    status.textContent = "Uploading…";
    document.getElementById("upload-submit").disabled = true;
    request.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) progress.value = Math.round(100 * e.loaded / e.total);
    });
    request.upload.addEventListener("load", function () { status.textContent = "Validating…"; });
    request.addEventListener("load", async function () {
      let data = null;
      try { data = JSON.parse(request.responseText); } catch (parseError) { data = { detail: request.responseText.slice(0, 300) }; }
      let answerStatus = request.status;
      if (answerStatus === 202 && data && data.kind === "ingest") {
        progress.value = 0;
        const ended = await td.follow({ ok: true, status: 202, data: data }, showIngestion);
        if (ended.ok && ended.data && ended.data.dataset_id) {
          window.location.assign("/datasets/" + encodeURIComponent(ended.data.dataset_id));
          return;
        }
        data = ended.data;
        answerStatus = ended.status;
      }
      document.getElementById("upload-submit").disabled = false;
      progress.hidden = true;
      const issues = td.issuesOf(data);
      // A form field's issue is shown beside that field; the file's issues go in the table.
      const FIELDS = { name: "upload-name", label_column: "upload-label-column", column_map: "upload-column-map",
        licence: "upload-licence", rights_note: "upload-rights-note" };
      issues.forEach(function (i) { if (FIELDS[i.field]) td.setFieldError(FIELDS[i.field], i.message); });
      showIssues(issues.filter(function (i) { return !FIELDS[i.field]; }));
      const detail = data && typeof data.detail === "string" ? data.detail : "The upload was refused";
      status.textContent = detail + " (" + answerStatus + ").";
      // A name taken since the page loaded, or the file's own name when none was typed: offer that dataset's next version.
      if (answerStatus === 409 && !nameInput.value.trim()) {
        const named = Object.keys(existing).filter(function (n) { return detail.indexOf("'" + n + "'") >= 0; })
          .sort(function (a, b) { return b.length - a.length; })[0];
        if (named) { nameInput.value = named; showTaken(); }
      }
    });
    request.addEventListener("error", function () {
      document.getElementById("upload-submit").disabled = false;
      status.textContent = "The upload failed: the server could not be reached.";
    });
    request.send(body);
  });
  form.dataset.ready = "true";
})();
