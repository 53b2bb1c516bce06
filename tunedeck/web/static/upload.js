"use strict";
// Dataset upload: drag and drop or pick a file, send it to the API's multipart endpoint with a
// progress bar, follow its ingestion on a worker (validation, scan, deduplication) with the same bar,
// then open the dataset page; a refused file lists its problems with line numbers.
(function () {
  const td = window.tunedeck;
  const t = td.t;
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
    if (!match) { asVersion.checked = false; submitButton.textContent = t("Upload"); return; }
    const name = nameInput.value.trim();
    const next = match.versions + 1;
    document.getElementById("upload-existing-text").textContent = match.versions === 1
      ? t("You already have a dataset named “{name}” (1 version). Upload this file as its version {next}, or choose another name.", { name: name, next: next })
      : t("You already have a dataset named “{name}” ({count} versions). Upload this file as its version {next}, or choose another name.", { name: name, count: match.versions, next: next });
    document.getElementById("upload-as-version-label").textContent = t("Upload as version {next} of “{name}”", { next: next, name: name });
    submitButton.textContent = asVersion.checked ? t("Upload as a new version") : t("Upload");
  }
  nameInput.addEventListener("input", showTaken);
  asVersion.addEventListener("change", showTaken);

  // Column mapping: the browser reads the file's first rows, lists their columns, and offers a select per
  // field the row format reads, prefilled where a column has the field's name. The selects write the
  // `target=source` text the API reads into the column-mapping field, which stays editable.
  const formatInfo = td.jsonScript("format-fields");
  const formatSelect = document.getElementById("upload-format");
  const mappingBox = document.getElementById("upload-mapping");
  const mappingFields = document.getElementById("upload-mapping-fields");
  const mappingHint = document.getElementById("upload-mapping-hint");
  const mapText = document.getElementById("upload-column-map");
  const HEAD_BYTES = 256 * 1024;  // the first rows of a JSONL or CSV file
  const WHOLE_JSON_BYTES = 8 * 1024 * 1024;  // a JSON array is only read whole, so only a small one
  let columns = [];
  let mappedFormat = null;  // the format whose fields the selects show

  function splitCsvLine(line, separator) {
    const cells = [];
    let cell = "", quoted = false;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i];
      if (quoted) {
        if (ch === '"' && line[i + 1] === '"') { cell += '"'; i++; } else if (ch === '"') quoted = false; else cell += ch;
      } else if (ch === '"') quoted = true;
      else if (ch === separator) { cells.push(cell); cell = ""; } else cell += ch;
    }
    cells.push(cell);
    return cells.map(function (c) { return c.trim(); }).filter(function (c) { return c; });
  }

  function keysOf(rows) {
    const seen = [];
    rows.forEach(function (row) {
      if (row && typeof row === "object" && !Array.isArray(row)) {
        Object.keys(row).forEach(function (key) { if (seen.indexOf(key) < 0) seen.push(key); });
      }
    });
    return seen;
  }

  // The file's column names, or null when its type is not read here (Parquet, text, compressed).
  async function readColumns(file) {
    const name = file.name.toLowerCase();
    if (/\.(jsonl|ndjson)$/.test(name)) {
      const lines = (await file.slice(0, HEAD_BYTES).text()).split(/\r?\n/).slice(0, 50);
      const rows = [];
      lines.forEach(function (line) { try { if (line.trim()) rows.push(JSON.parse(line)); } catch (e) { /* a cut last line */ } });
      return keysOf(rows);
    }
    if (/\.json$/.test(name)) {
      if (file.size > WHOLE_JSON_BYTES) return null;
      let data;
      try { data = JSON.parse(await file.text()); } catch (e) { return []; }
      if (!Array.isArray(data) && data && typeof data === "object") {
        data = Object.values(data).find(function (value) { return Array.isArray(value); }) || [];
      }
      return keysOf(Array.isArray(data) ? data.slice(0, 50) : []);
    }
    if (/\.(csv|tsv)$/.test(name)) {
      const head = (await file.slice(0, HEAD_BYTES).text()).replace(/^\ufeff/, "");
      return splitCsvLine(head.split(/\r?\n/)[0] || "", name.endsWith(".tsv") ? "\t" : ",");
    }
    return null;
  }

  function detectedFormat() {
    const found = formatInfo.signatures.find(function (entry) {
      return entry[1].every(function (field) { return columns.indexOf(field) >= 0; });
    });
    return found ? found[0] : null;
  }

  function prefilled(field) {
    if (columns.indexOf(field) >= 0) return field;
    return columns.find(function (c) { return c.toLowerCase() === field.toLowerCase(); }) || "";
  }

  // The selects as `target=source` pairs: only the fields read from a column of another name.
  function writeMapping() {
    const pairs = [];
    mappingFields.querySelectorAll("select[data-target]").forEach(function (select) {
      if (select.value && select.value !== select.dataset.target) pairs.push(select.dataset.target + "=" + select.value);
      td.setFieldError("map-" + select.dataset.target, "");
    });
    mapText.value = pairs.join(",");
  }

  function fieldSelect(field, required) {
    const wrap = document.createElement("div");
    wrap.className = "field";
    const label = document.createElement("label");
    label.htmlFor = "f-map-" + field;
    label.textContent = required ? t("{field} (required)", { field: field }) : t("{field} (optional)", { field: field });
    const select = document.createElement("select");
    select.id = "f-map-" + field;
    select.name = "map-" + field;
    select.dataset.target = field;
    select.dataset.required = required ? "true" : "false";
    select.setAttribute("aria-describedby", "err-map-" + field);
    const none = document.createElement("option");
    none.value = "";
    none.textContent = required ? t("choose a column…") : t("none");
    select.appendChild(none);
    columns.forEach(function (column) {
      const option = document.createElement("option");
      option.value = column;
      option.textContent = column;
      // The mapping's syntax cannot name a column holding "=" or ",".
      if (/[=,]/.test(column)) { option.disabled = true; option.textContent = t("{column} (its name holds = or ,)", { column: column }); }
      select.appendChild(option);
    });
    select.value = prefilled(field);
    select.addEventListener("change", writeMapping);
    const error = document.createElement("p");
    error.className = "field-error";
    error.id = "err-map-" + field;
    error.setAttribute("role", "alert");
    wrap.append(label, select, error);
    return wrap;
  }

  function showMapping() {
    mappingFields.textContent = "";
    mappedFormat = null;
    mappingBox.hidden = columns === null;
    if (columns === null) return;
    document.getElementById("upload-columns").textContent = columns.length
      ? t("Columns found in the first rows: {columns}.", { columns: columns.join(", ") })
      : t("No columns could be read from the start of this file.");
    const chosenFormat = formatSelect.value === "auto" ? detectedFormat() : formatSelect.value;
    mappedFormat = chosenFormat;
    if (!chosenFormat || !columns.length) {
      mappingHint.textContent = columns.length
        ? t("No row format recognised from these column names: choose the row format below, then the column for each of its fields.")
        : "";
      mapText.value = "";
      return;
    }
    const fields = formatInfo.fields[chosenFormat];
    mappingHint.textContent = formatSelect.value === "auto"
      ? t("Detected format {format}: choose the file's column for each field it reads.", { format: chosenFormat })
      : t("Format {format}: choose the file's column for each field it reads.", { format: chosenFormat });
    fields.required.forEach(function (field) { mappingFields.appendChild(fieldSelect(field, true)); });
    fields.optional.forEach(function (field) { mappingFields.appendChild(fieldSelect(field, false)); });
    writeMapping();
  }

  // A required field left without a column: said beside its select, before anything is sent.
  function unmappedField() {
    const empty = Array.prototype.find.call(mappingFields.querySelectorAll("select[data-required=true]"),
      function (select) { return !select.value; });
    if (!empty) return null;
    td.setFieldError("map-" + empty.dataset.target, t("Choose the file's column for “{field}”: the {format} format needs it.",
      { field: empty.dataset.target, format: mappedFormat }));
    return empty;
  }

  formatSelect.addEventListener("change", showMapping);

  async function choose(file) {
    chosen = file || null;
    document.getElementById("upload-file-name").textContent = chosen
      ? t("{name} ({size} bytes)", { name: chosen.name, size: chosen.size }) : t("No file chosen.");
    columns = chosen ? await readColumns(chosen) : null;
    if (file !== chosen) return;  // another file was chosen while this one was read
    showMapping();
    form.dataset.columnsRead = chosen ? chosen.name : "";
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
  const PHASES = {
    queued: t("Waiting for a worker…"),
    receiving: t("A worker is reading the upload…"),
    validating: t("Validating, scanning and deduplicating rows…"),
    storing: t("Storing the dataset…"),
  };
  function showIngestion(phase, detail) {
    status.textContent = PHASES[phase] || phase;
    if (detail && detail.total) {
      progress.value = Math.round(100 * detail.done / detail.total);
      status.textContent = t("{phase} {percent}%", { phase: status.textContent, percent: progress.value });
    }
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    td.clearErrors(form);
    showIssues([]);
    if (!chosen) { status.textContent = t("Choose a file first."); input.focus(); return; }
    const unmapped = unmappedField();
    if (unmapped) { unmapped.focus(); return; }
    if (maxBytes && chosen.size > maxBytes) {
      status.textContent = t("The file is larger than the server accepts ({bytes} bytes).", { bytes: maxBytes });
      return;
    }
    const name = nameInput;
    if (name.value && !name.checkValidity()) {
      // The browser's own message (from the pattern), then the rule in words.
      td.setFieldError("upload-name", name.validationMessage
        + " " + t("Letters, digits, dot, dash and underscore; start with a letter or digit."));
      name.focus();
      return;
    }
    const match = taken();
    if (match && !asVersion.checked) {
      td.setFieldError("upload-name", t("This name is taken: choose another name, or tick “upload as a new version”."));
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
    status.textContent = t("Uploading…");
    document.getElementById("upload-submit").disabled = true;
    request.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) progress.value = Math.round(100 * e.loaded / e.total);
    });
    request.upload.addEventListener("load", function () { status.textContent = t("Validating…"); });
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
      const detail = data && typeof data.detail === "string" ? data.detail : t("The upload was refused");
      status.textContent = t("{reason} ({status}).", { reason: detail, status: answerStatus });
      // A name taken since the page loaded, or the file's own name when none was typed: offer that dataset's next version.
      if (answerStatus === 409 && !nameInput.value.trim()) {
        const named = Object.keys(existing).filter(function (n) { return detail.indexOf("'" + n + "'") >= 0; })
          .sort(function (a, b) { return b.length - a.length; })[0];
        if (named) { nameInput.value = named; showTaken(); }
      }
    });
    request.addEventListener("error", function () {
      document.getElementById("upload-submit").disabled = false;
      status.textContent = t("The upload failed: the server could not be reached.");
    });
    request.send(body);
  });
  form.dataset.ready = "true";
})();
