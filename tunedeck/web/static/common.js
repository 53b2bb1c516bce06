"use strict";
// Shared by every page: calls to the JSON API with the session cookie and CSRF header, field messages.
window.tunedeck = (function () {
  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRF-Token"] = csrfToken();
    const init = { method: method, headers: headers, credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (parseError) { data = { detail: text.slice(0, 300) }; }
    }
    return { ok: response.ok, status: response.status, data: data };
  }

  // Model work (generation, export, preflight, inspection, an upload's ingestion) is queued for a
  // worker: the API answers 202 with the item at once. Follow it until it ends; onPhase(text, progress)
  // hears what it is doing (progress.done / progress.total when the work can tell how far it is).
  // Resolves like api(): ok with the item's result as data, or the item's error as {detail, issues}.
  async function work(method, path, body, onPhase) {
    return follow(await api(method, path, body), onPhase);
  }

  async function follow(answer, onPhase) {
    while (answer.ok && answer.data && answer.data.kind && !["succeeded", "failed", "cancelled"].includes(answer.data.state)) {
      const progress = answer.data.progress || {};
      if (onPhase) onPhase(progress.phase || answer.data.state, progress);
      answer = await api("GET", "/api/v1/work/" + encodeURIComponent(answer.data.id) + "?wait=2");
    }
    if (!answer.ok || !answer.data || !answer.data.kind) return answer;
    if (answer.data.state === "succeeded") return { ok: true, status: 200, data: answer.data.result };
    const error = answer.data.error || { status: 500, detail: "the work was " + answer.data.state };
    return { ok: false, status: error.status || 500, data: { detail: error.detail, issues: error.issues || [] } };
  }

  // Both error shapes: ours ({detail, issues: [{field, message, ...}]}) and request validation
  // ({detail: [{loc, msg}]}). Returns [{field, message}] with fields relative to the request body.
  function issuesOf(data) {
    if (!data) return [];
    if (Array.isArray(data.detail)) {
      return data.detail.map(function (item) {
        const loc = (item.loc || []).filter(function (part) { return part !== "body"; });
        return { field: loc.join("."), message: item.msg || "invalid" };
      });
    }
    if (Array.isArray(data.issues) && data.issues.length) {
      return data.issues.map(function (issue) {
        let message = issue.message || "invalid";
        if (issue.line) message = "line " + issue.line + ": " + message;
        return { field: issue.field || "", message: message, line: issue.line, found: issue.found, expected: issue.expected };
      });
    }
    return [];
  }

  function setFieldError(key, message) {
    const slot = document.getElementById("err-" + key);
    const input = document.getElementById("f-" + key) || document.getElementById("model-" + key);
    if (!slot) return false;
    slot.textContent = message || "";
    if (input) {
      if (message) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
    return true;
  }

  function clearErrors(root) {
    root.querySelectorAll(".field-error, .form-error").forEach(function (el) { el.textContent = ""; });
    root.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
  }

  function jsonScript(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  // A colour of the page's theme (a CSS variable such as "--chart-text"), for what is drawn on a canvas.
  function themeColor(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // A number in three significant digits, in exponent form when very large or very small (chart axes, metrics).
  function formatNumber(value) {
    if (value === 0 || !isFinite(value)) return "0";
    const abs = Math.abs(value);
    if (abs >= 1e5 || abs < 1e-3) return value.toExponential(1);
    return String(Number(value.toPrecision(3)));
  }

  return { csrfToken: csrfToken, api: api, work: work, follow: follow, issuesOf: issuesOf, setFieldError: setFieldError,
           clearErrors: clearErrors, jsonScript: jsonScript, formatNumber: formatNumber, themeColor: themeColor,
           t: window.tunedeckWords };
})();
