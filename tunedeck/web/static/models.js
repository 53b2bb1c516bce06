"use strict";
// Base-model registration through the JSON API: a folder on the server, or a hub id with a revision.
(function () {
  const td = window.tunedeck;
  const t = td.t;
  const form = document.getElementById("model-form");
  const source = document.getElementById("model-source");

  function showSource() {
    form.querySelectorAll("[data-source]").forEach(function (el) { el.hidden = el.dataset.source !== source.value; });
  }

  source.addEventListener("change", showSource);
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    td.clearErrors(form);
    const body = {};
    const name = document.getElementById("model-name").value.trim();
    if (name) body.name = name;
    if (source.value === "local") {
      body.local_path = document.getElementById("model-local_path").value.trim();
      if (!body.local_path) { td.setFieldError("local_path", t("Enter the absolute path of a model folder.")); return; }
    } else {
      body.hub_id = document.getElementById("model-hub_id").value.trim();
      const revision = document.getElementById("model-revision").value.trim();
      if (revision) body.revision = revision;
      if (!body.hub_id) { td.setFieldError("hub_id", t("Enter a repository id like org/model.")); return; }
    }
    const answer = await td.api("POST", "/api/v1/base-models", body);
    if (answer.ok) { window.location.reload(); return; }
    const issues = td.issuesOf(answer.data);
    let placed = false;
    issues.forEach(function (issue) { if (td.setFieldError(issue.field, issue.message)) placed = true; });
    if (!placed) {
      document.getElementById("model-form-error").textContent =
        issues.map(function (i) { return i.message; }).join(" ") || (answer.data && answer.data.detail) || t("Refused ({status}).", { status: answer.status });
    }
  });
  showSource();
})();
