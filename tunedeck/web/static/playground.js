"use strict";
// Job page playground: the same prompt through the base model and the fine-tuned one, side by side.
(function () {
  // Run again by the job page when it swaps this section in (the job ended while the page was open).
  function init() {
    const section = document.getElementById("playground");
    const form = document.getElementById("playground-form");
    if (!section || !form) return;
    function show(id, generation) {
      const slot = document.getElementById(id);
      if (!generation) { slot.textContent = "(not compared)"; return; }
      const how = generation.stopped ? "ended its turn" : "reached max new tokens";
      slot.textContent = (generation.text || "(empty answer)") + "\n\n— " + generation.new_tokens + " new tokens, " + how;
      slot.dataset.newTokens = String(generation.new_tokens);
    }

    // Whether the worker already held the model (a warm answer) or fetched and loaded it for this prompt.
    function showModelLoad(result) {
      const line = document.getElementById("playground-model-load");
      if (!line || typeof result.model_cached !== "boolean") return;
      line.textContent = result.model_cached ? "The model was already loaded on the worker."
        : "The model was loaded for this prompt in " + Number(result.load_s || 0).toFixed(1) +
          " s; the worker keeps it loaded for the next ones while it has room.";
      line.hidden = false;
    }

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      const error = document.getElementById("playground-error");
      const prompt = document.getElementById("playground-prompt").value.trim();
      const checkpoint = document.getElementById("playground-checkpoint").value;
      const maxNew = parseInt(document.getElementById("playground-max_new_tokens").value, 10);
      error.textContent = "";
      if (!prompt) { error.textContent = "Write a prompt first."; return; }
      if (!(maxNew >= 1 && maxNew <= 1024)) { error.textContent = "Max new tokens must be between 1 and 1024."; return; }
      const body = { prompt: prompt, max_new_tokens: maxNew, compare_base: true };
      if (checkpoint) body.checkpoint = parseInt(checkpoint, 10);
      const button = form.querySelector("button");
      button.disabled = true;
      button.textContent = "Generating…";
      const answer = await window.tunedeck.work("POST", "/api/v1/jobs/" + section.dataset.job + "/generate", body,
        function (phase) { button.textContent = "Generating… (" + phase + ")"; });
      button.disabled = false;
      button.textContent = "Generate";
      if (!answer.ok) {
        const issues = window.tunedeck.issuesOf(answer.data);
        error.textContent = issues.length ? issues.map(function (i) { return i.message; }).join("; ")
          : ((answer.data && answer.data.detail) || "Generation failed (" + answer.status + ").");
        return;
      }
      show("playground-base", answer.data.base);
      show("playground-tuned", answer.data.fine_tuned);
      document.getElementById("playground-answers").hidden = false;
      showModelLoad(answer.data);
    });
  }
  window.tunedeck.initPlayground = init;
  init();
})();
