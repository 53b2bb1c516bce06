"use strict";
// Dataset page: ask a worker to tokenize this version with a base model, then show the stored report
// (with, in red, the rows its max_length and truncation would make training refuse or leave out).
(function () {
  const form = document.getElementById("inspect-form");
  if (!form) return;
  const t = window.tunedeck.t;
  // What the worker is doing, as its progress names it.
  const PHASES = { queued: t("queued"), running: t("running"), "fetching the data": t("fetching the data"),
    tokenizing: t("tokenizing") };
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const error = document.getElementById("inspect-error");
    const button = form.querySelector("button");
    const model = document.getElementById("inspect-base_model_id").value;
    const maxLength = parseInt(document.getElementById("inspect-max_length").value, 10);
    error.textContent = "";
    if (!(maxLength >= 8)) { error.textContent = t("Max length must be at least 8."); return; }
    button.disabled = true;
    button.textContent = t("Tokenizing…");
    const answer = await window.tunedeck.work("POST", "/api/v1/datasets/" + form.dataset.dataset + "/inspection", {
      base_model_id: model, max_length: maxLength, version: parseInt(form.dataset.version, 10),
      truncation: document.getElementById("inspect-truncation").value,
    }, function (phase) { button.textContent = t("Tokenizing… ({phase})", { phase: PHASES[phase] || phase }); });
    if (answer.ok) {
      window.location.href = "?version=" + form.dataset.version + "&model=" + encodeURIComponent(model) + "#inspection";
      return;
    }
    button.disabled = false;
    button.textContent = t("Inspect");
    const issues = window.tunedeck.issuesOf(answer.data);
    error.textContent = issues.length ? issues.map(function (i) { return i.message; }).join("; ")
      : ((answer.data && answer.data.detail) || t("The inspection failed ({status}).", { status: answer.status }));
  });
})();
