"use strict";
// Job page exports: the job's committed exports (loaded from the API), and a form that queues a new one
// for a worker and follows it on a bar (bytes fetched and stored; the build itself has no count), then
// offers the new export's download.
(function () {
  // Run again by the job page when it swaps this section in (the job ended while the page was open).
  function init() {
    const td = window.tunedeck;
    const section = document.getElementById("exports-section");
    const form = document.getElementById("export-form");
    if (!section || !form) return;
    const exportsPath = "/api/v1/jobs/" + encodeURIComponent(section.dataset.job) + "/exports";
    const button = document.getElementById("export-submit");
    const bar = document.getElementById("export-progress");
    const status = document.getElementById("export-status");
    const download = document.getElementById("export-download");
    const t = td.t;
    const PHASES = {
      queued: t("Waiting for a worker…"),
      running: t("A worker took the export…"),
      "fetching the model": t("Fetching the model from storage…"),
      exporting: t("Building the export…"),
      committing: t("Storing the export…"),
    };

    function formatBytes(bytes) {
      const units = [t("bytes"), "KB", "MB", "GB", "TB"];
      let value = Number(bytes) || 0;
      let unit = 0;
      while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
      return (unit === 0 ? String(value) : value.toFixed(value < 10 ? 1 : 0)) + " " + units[unit];
    }

    function describePin(pin) {
      if (!pin) return "—";
      if (pin.source === "hub") return pin.model_id + " @ " + String(pin.revision || "").slice(0, 12);
      return pin.model_id + (pin.fingerprint ? " (sha256 " + String(pin.fingerprint).slice(0, 12) + "…)" : "");
    }

    function cell(row, text, className) {
      const item = document.createElement("td");
      if (className) item.className = className;
      item.textContent = text;
      row.appendChild(item);
      return item;
    }

    function exportRow(entry) {
      const row = document.createElement("tr");
      row.dataset.name = entry.name;
      cell(row, entry.name);
      cell(row, entry.contents.replace(/_/g, " "));
      const size = formatBytes(entry.total_bytes);
      cell(row, entry.files.length === 1 ? t("{size} in 1 file", { size: size })
        : t("{size} in {count} files", { size: size, count: entry.files.length }));
      const pin = cell(row, "");
      const code = document.createElement("code");
      code.className = "wrap";
      code.textContent = describePin(entry.pin);
      pin.appendChild(code);
      const warnings = cell(row, "");
      if (entry.warnings && entry.warnings.length) {
        const list = document.createElement("ul");
        list.className = "warn";
        entry.warnings.forEach(function (text) {
          const item = document.createElement("li"); item.textContent = text; list.appendChild(item);
        });
        warnings.appendChild(list);
      } else {
        warnings.textContent = "—";
      }
      const download = cell(row, "");
      const link = document.createElement("a");
      link.href = entry.archive_url;
      link.setAttribute("download", "");
      link.textContent = "zip";
      link.setAttribute("aria-label", t("Download {name} (zip)", { name: entry.name }));
      download.appendChild(link);
      download.appendChild(document.createTextNode(" · "));
      const remove = document.createElement("a");
      remove.href = "/deletions/confirm?kind=export&target=" + encodeURIComponent(section.dataset.job + "/" + entry.name);
      remove.textContent = t("delete");
      remove.setAttribute("aria-label", t("Delete {name}", { name: entry.name }));
      download.appendChild(remove);
      return row;
    }

    // Fills the table; returns the committed exports (none when they could not be read).
    async function loadExports(highlight) {
      const body = document.querySelector("#exports tbody");
      const answer = await td.api("GET", exportsPath);
      body.textContent = "";
      if (!answer.ok || !Array.isArray(answer.data)) {
        const row = document.createElement("tr");
        row.className = "empty";
        const why = (answer.data && answer.data.detail) || answer.status;
        cell(row, t("The exports could not be read ({reason}).", { reason: why })).colSpan = 6;
        body.appendChild(row);
        return [];
      }
      answer.data.forEach(function (entry) {
        const row = exportRow(entry);
        if (entry.name === highlight) row.classList.add("fresh");
        body.appendChild(row);
      });
      if (!answer.data.length) {
        const row = document.createElement("tr");
        row.className = "empty";
        cell(row, t("No export yet.")).colSpan = 6;
        body.appendChild(row);
      }
      body.dataset.loaded = "true";
      return answer.data;
    }

    function showPhase(phase, progress) {
      let text = PHASES[phase] || phase;
      if (progress && progress.total) {
        bar.max = progress.total;
        bar.value = Math.min(progress.done || 0, progress.total);
        const share = Math.round(100 * bar.value / progress.total);
        const done = progress.unit === "bytes" ? formatBytes(bar.value) : bar.value;
        const total = progress.unit === "bytes" ? formatBytes(progress.total) : progress.total;
        text = t("{phase} {share}% ({done} of {total})", { phase: text, share: share, done: done, total: total });
      } else {
        bar.removeAttribute("value");  // indeterminate: this phase cannot tell how far it is
      }
      status.textContent = text;
    }

    function showError(answer) {
      const detail = document.getElementById("export-error-detail");
      const list = document.getElementById("export-issues");
      const data = answer.data || {};
      const reason = typeof data.detail === "string" ? data.detail : t("the server answered {status}", { status: answer.status });
      detail.textContent = t("The export failed: {reason} ({status}).", { reason: reason, status: answer.status });
      list.textContent = "";
      td.issuesOf(data).forEach(function (issue) {
        const item = document.createElement("li");
        item.textContent = (issue.field ? issue.field + ": " : "") + issue.message;
        list.appendChild(item);
      });
    }

    // The MLX options show only while the MLX format is chosen.
    const mlxFields = document.getElementById("export-mlx-options");
    form.querySelectorAll('input[name="format"]').forEach(function (radio) {
      radio.addEventListener("change", function () {
        mlxFields.hidden = form.querySelector('input[name="format"]:checked').value !== "mlx";
      });
    });

    // The API's MLX fields: 4 or 8 in the weights list is a quantisation, the others a dtype.
    function mlxOptions() {
      const options = { mlx_contents: document.getElementById("export-mlx-contents").value };
      const weights = document.getElementById("export-mlx-weights").value;
      if (weights === "4" || weights === "8") options.quantize_bits = parseInt(weights, 10);
      else options.dtype = weights;
      const memory = document.getElementById("export-mlx-memory").value;
      if (memory) options.unified_memory_gb = parseFloat(memory);
      return options;
    }

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      td.clearErrors(form);
      document.getElementById("export-issues").textContent = "";
      const chosen = form.querySelector('input[name="format"]:checked');
      if (!chosen) { document.getElementById("export-error-detail").textContent = t("Choose a format first."); return; }
      const checkpoint = document.getElementById("export-checkpoint").value;
      const body = { format: chosen.value };
      if (checkpoint) body.checkpoint = parseInt(checkpoint, 10);
      if (chosen.value === "mlx") Object.assign(body, mlxOptions());
      button.disabled = true;
      button.textContent = t("Exporting…");
      download.hidden = true;
      bar.hidden = false;
      showPhase("queued", {});
      let answer;
      try {
        answer = await td.work("POST", exportsPath, body, showPhase);
      } catch (networkError) {
        answer = { ok: false, status: 0, data: { detail: t("the server could not be reached") } };
      }
      bar.hidden = true;
      button.disabled = false;
      button.textContent = t("Export");
      if (!answer.ok) { status.textContent = ""; showError(answer); return; }
      const name = answer.data && answer.data.name;
      status.textContent = t("Exported {name}: it is in the list below.", { name: name });
      const made = (await loadExports(name)).find(function (entry) { return entry.name === name; });
      if (made) {
        download.href = made.archive_url;
        download.textContent = t("Download {name} (zip, {size})", { name: name, size: formatBytes(made.total_bytes) });
        download.hidden = false;
      }
    });

    loadExports(null);
    form.dataset.ready = "true";
  }
  window.tunedeck.initExports = init;
  init();
})();
