"use strict";
// Job page playground: a conversation with the fine-tuned model and, beside it, the base model.
// Each column keeps its own answers; both receive the same system prompt and user turns. Answers
// stream from the OpenAI-compatible chat completions route (signed in by the session cookie).
(function () {
  const t = window.tunedeckWords;
  const COLUMNS = ["tuned", "base"];
  const ROLE_NAMES = { user: t("You"), tuned: t("Fine-tuned model"), base: t("Base model") };

  // Run again by the job page when it swaps this section in (the job ended while the page was open).
  function init() {
    const td = window.tunedeck;
    const section = document.getElementById("playground");
    const form = document.getElementById("playground-form");
    if (!section || !form) return;
    const field = function (name) { return document.getElementById("playground-" + name); };
    const error = field("error");
    const send = field("send");
    const stop = field("stop");
    const limits = {
      maxNew: Number(section.dataset.maxNewTokens),
      maxTemperature: Number(section.dataset.maxTemperature),
      maxSeed: Number(section.dataset.maxSeed),
    };
    // One entry per user turn: {user, tuned: {text}, base: {text}}.
    let turns = [];
    let running = null;  // the AbortController of the answers being streamed

    field("sample").addEventListener("change", function () {
      ["temperature", "top_p", "seed"].forEach(function (name) { field(name).disabled = !field("sample").checked; });
    });

    function wholeNumber(value, low, high) {
      const number = Number(value);
      return value.trim() !== "" && Number.isInteger(number) && number >= low && number <= high ? number : null;
    }

    // The sampling fields as the chat completions request's, or the first field that is wrong (named).
    function sampling() {
      const maxNew = wholeNumber(field("max_new_tokens").value, 1, limits.maxNew);
      if (maxNew === null) return { problem: t("Max new tokens must be a whole number from 1 to {most}.", { most: limits.maxNew }) };
      if (!field("sample").checked) return { body: { max_tokens: maxNew, temperature: 0 } };
      const temperature = Number(field("temperature").value);
      if (!(field("temperature").value.trim() && temperature > 0 && temperature <= limits.maxTemperature)) {
        return { problem: t("Temperature must be more than 0 and at most {most}.", { most: limits.maxTemperature }) };
      }
      const topP = Number(field("top_p").value);
      if (!(field("top_p").value.trim() && topP > 0 && topP <= 1)) return { problem: t("Top-p must be more than 0 and at most 1.") };
      const seed = wholeNumber(field("seed").value, 0, limits.maxSeed);
      if (seed === null) return { problem: t("Seed must be a whole number from 0 to {most}.", { most: limits.maxSeed }) };
      return { body: { max_tokens: maxNew, temperature: temperature, top_p: topP, seed: seed } };
    }

    function modelFor(column) {
      if (column === "base") return section.dataset.baseModel || null;
      const option = field("checkpoint").selectedOptions[0];
      return option ? option.dataset.model : null;
    }

    // The conversation `column` has had, ending with the newest user turn.
    function messagesFor(column) {
      const messages = [];
      const system = field("system").value.trim();
      if (system) messages.push({ role: "system", content: system });
      turns.forEach(function (turn, index) {
        messages.push({ role: "user", content: turn.user });
        if (index < turns.length - 1) messages.push({ role: "assistant", content: turn[column].text });
      });
      return messages;
    }

    function bubble(list, role, text) {
      const empty = list.querySelector(".empty");
      if (empty) empty.remove();
      const item = document.createElement("li");
      item.className = "bubble bubble-" + (role === "user" ? "user" : "assistant");
      const name = document.createElement("span");
      name.className = "role";
      name.textContent = ROLE_NAMES[role];
      const body = document.createElement("div");
      body.className = "text";
      body.textContent = text;
      const note = document.createElement("span");
      note.className = "note muted";
      item.append(name, body, note);
      list.appendChild(item);
      return item;
    }

    // The server's own message (in English), else what is known: the HTTP status, or that it reported an error.
    function openAiError(data, status) {
      const detail = data && data.error ? data.error : (data || {});
      const message = typeof detail.message === "string" ? detail.message
        : (typeof detail.detail === "string" ? detail.detail
          : (status ? t("the server answered {status}", { status: status }) : t("the server reported an error")));
      return (detail.param ? detail.param + ": " : "") + message;
    }

    // Server-sent events from a fetch body, one `data:` payload at a time, until `[DONE]`.
    async function readEvents(response, onData) {
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) return;
          buffer += decoder.decode(chunk.value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = event.split("\n").filter(function (line) { return line.startsWith("data: "); })
              .map(function (line) { return line.slice(6); }).join("\n");
            if (data === "[DONE]") return;
            if (data) onData(JSON.parse(data));
          }
        }
      } catch (failure) {
        reader.cancel().catch(function () {});  // closing the stream makes the server cancel the answer
        throw failure;
      }
    }

    // Stream one column's answer into its bubble; resolves with what the worker reported (or the failure).
    async function answer(column, options, signal) {
      const list = field(column);
      const state = field(column + "-state");
      const turn = turns[turns.length - 1];
      const item = bubble(list, column, "");
      const text = item.querySelector(".text");
      const note = item.querySelector(".note");
      turn[column] = { text: "" };
      const model = modelFor(column);
      if (!model) { note.textContent = t("(not compared: the job has no registered base model)"); return null; }
      item.dataset.streaming = "true";
      item.dataset.chunks = "0";
      list.setAttribute("aria-busy", "true");
      state.textContent = t("Waiting for the model…");
      let outcome = { item: null };
      try {
        const response = await fetch(section.dataset.chatPath, {
          method: "POST",
          credentials: "same-origin",
          signal: signal,
          headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": td.csrfToken() },
          body: JSON.stringify(Object.assign({ model: model, messages: messagesFor(column), stream: true,
                                               stream_options: { include_usage: true } }, options)),
        });
        if (!response.ok) {
          let data = null;
          try { data = await response.json(); } catch (parseError) { data = null; }
          throw new Error(openAiError(data, response.status));
        }
        state.textContent = t("Writing…");
        let reason = null;
        let tokens = null;
        await readEvents(response, function (event) {
          if (event.error) throw new Error(openAiError(event, null));
          if (event.id && !outcome.item) outcome.item = String(event.id).replace(/^chatcmpl-/, "");
          if (event.usage) tokens = event.usage.completion_tokens;
          const choice = (event.choices || [])[0];
          if (!choice) return;
          if (choice.delta && choice.delta.content) {
            turn[column].text += choice.delta.content;
            text.textContent = turn[column].text;
            item.dataset.chunks = String(Number(item.dataset.chunks) + 1);
          }
          if (choice.finish_reason) reason = choice.finish_reason;
        });
        if (!turn[column].text) text.textContent = t("(empty answer)");
        const full = reason === "length";
        if (tokens === null) note.textContent = full ? t("reached max new tokens") : t("ended its turn");
        else note.textContent = full ? t("{count} new tokens, reached max new tokens", { count: tokens })
          : t("{count} new tokens, ended its turn", { count: tokens });
        item.dataset.newTokens = tokens === null ? "" : String(tokens);
        state.textContent = "";
      } catch (failure) {
        if (failure.name === "AbortError") {
          note.textContent = t("stopped");
          state.textContent = t("Stopped.");
        } else {
          item.classList.add("failed");
          note.textContent = "";
          text.textContent = turn[column].text;
          const message = document.createElement("p");
          message.className = "form-error";
          message.textContent = t("No answer: {reason}.", { reason: failure.message || t("the server could not be reached") });
          item.appendChild(message);
          state.textContent = "";
          outcome = { item: outcome.item, failed: true };
        }
      } finally {
        delete item.dataset.streaming;
        list.removeAttribute("aria-busy");
      }
      return outcome;
    }

    // Whether the worker already held each model (a warm answer) or loaded it for this message.
    async function showModelLoad(outcomes) {
      const parts = [];
      for (const [column, outcome] of outcomes) {
        if (!outcome || !outcome.item || outcome.failed) continue;
        const work = await td.api("GET", "/api/v1/work/" + encodeURIComponent(outcome.item));
        const result = work.ok && work.data ? work.data.result : null;
        if (!result || typeof result.model_cached !== "boolean") continue;
        parts.push(result.model_cached ? t("{model}: already loaded on the worker", { model: ROLE_NAMES[column] })
          : t("{model}: loaded for this message in {seconds} s",
            { model: ROLE_NAMES[column], seconds: Number(result.load_s || 0).toFixed(1) }));
      }
      const line = field("model-load");
      if (!parts.length) return;
      line.textContent = t("{loads}. The worker keeps models loaded for the next messages while it has room.", { loads: parts.join("; ") });
      line.hidden = false;
    }

    function setRunning(controller) {
      running = controller;
      send.disabled = Boolean(controller);
      send.textContent = controller ? t("Answering…") : t("Send");
      stop.hidden = !controller;
      field("clear").disabled = Boolean(controller);
      section.dataset.streaming = controller ? "true" : "false";
    }

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      if (running) return;
      error.textContent = "";
      const message = field("prompt").value.trim();
      if (!message) { error.textContent = t("Write a message first."); return; }
      if (!modelFor("tuned")) { error.textContent = t("Choose a model first."); return; }
      const chosen = sampling();
      if (chosen.problem) { error.textContent = chosen.problem; return; }
      turns.push({ user: message, tuned: { text: "" }, base: { text: "" } });
      COLUMNS.forEach(function (column) { bubble(field(column), "user", message); });
      field("prompt").value = "";
      const controller = new AbortController();
      setRunning(controller);
      const outcomes = await Promise.all(COLUMNS.map(function (column) {
        return answer(column, chosen.body, controller.signal);
      }));
      setRunning(null);
      await showModelLoad(COLUMNS.map(function (column, index) { return [column, outcomes[index]]; }));
    });

    // Enter sends, Shift+Enter writes a new line, as in chat applications.
    field("prompt").addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });

    stop.addEventListener("click", function () { if (running) running.abort(); });

    field("clear").addEventListener("click", function () {
      turns = [];
      error.textContent = "";
      COLUMNS.forEach(function (column) {
        const list = field(column);
        list.textContent = "";
        const empty = document.createElement("li");
        empty.className = "empty muted";
        empty.textContent = t("No message yet.");
        list.appendChild(empty);
        field(column + "-state").textContent = "";
      });
      field("prompt").focus();
    });
    form.dataset.ready = "true";
  }
  window.tunedeck.initPlayground = init;
  init();
})();
