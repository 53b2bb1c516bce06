"use strict";
// Registering a hub dataset's split: the form sends a JSON request to the API, a worker fetches and
// checks the split, and the dataset page opens; a refusal is shown beside its field or below the form.
(function () {
  const td = window.tunedeck;
  const form = document.getElementById("hub-form");
  if (!form) return;
  const status = document.getElementById("hub-status");
  const FIELDS = { hub: "hub-id", split: "hub-split", subset: "hub-subset", revision: "hub-revision", name: "hub-name" };
  const t = td.t;
  const PHASES = {
    queued: t("Waiting for a worker…"),
    fetching: t("Fetching the split from the hub…"),
    receiving: t("A worker is reading the split…"),
    validating: t("Validating, scanning and deduplicating rows…"),
    storing: t("Storing the dataset…"),
  };
  // What each field takes, after the browser's own message (which comes from the field's pattern).
  const RULES = {
    "hub-id": t("Letters, digits, dot, dash and underscore, as owner/name."),
    "hub-revision": t("Letters, digits, dot, dash, underscore or slash."),
  };

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    td.clearErrors(form);
    const body = {};
    Object.keys(FIELDS).forEach(function (key) {
      const value = document.getElementById(FIELDS[key]).value.trim();
      if (value) body[key] = value;
    });
    if (!body.hub) { td.setFieldError("hub-id", t("Give the dataset's id, owner/name.")); return; }
    if (!body.split) { td.setFieldError("hub-split", t("Give the split to register, such as train.")); return; }
    // Each field's pattern is the rule the API checks: the browser's message says which one breaks it.
    const broken = Object.keys(FIELDS).map(function (key) { return document.getElementById(FIELDS[key]); })
      .filter(function (input) { return input.value.trim() && !input.checkValidity(); });
    if (broken.length) {
      broken.forEach(function (input) {
        const rule = RULES[input.id] || t("Letters, digits, dot, dash and underscore.");
        td.setFieldError(input.id, input.validationMessage + " " + rule);
      });
      broken[0].focus();
      return;
    }
    document.getElementById("hub-submit").disabled = true;
    status.textContent = t("Sending…");
    const ended = await td.work("POST", "/api/v1/hub-datasets", body, function (phase) {
      status.textContent = PHASES[phase] || phase;
    });
    if (ended.ok && ended.data && ended.data.dataset_id) {
      window.location.assign("/datasets/" + encodeURIComponent(ended.data.dataset_id));
      return;
    }
    document.getElementById("hub-submit").disabled = false;
    const issues = td.issuesOf(ended.data);
    const others = [];
    issues.forEach(function (issue) {
      if (!(FIELDS[issue.field] && td.setFieldError(FIELDS[issue.field], issue.message))) others.push(issue.message);
    });
    const detail = ended.data && typeof ended.data.detail === "string" ? ended.data.detail : t("The request was refused");
    status.textContent = others.length
      ? t("{reason}: {issues} ({status}).", { reason: detail, issues: others.join("; "), status: ended.status })
      : t("{reason} ({status}).", { reason: detail, status: ended.status });
  });
  form.dataset.ready = "true";
})();
