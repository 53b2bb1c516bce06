"use strict";
// The page's words for its scripts: `tunedeckWords("Theme: dark")` is that message in the page's
// language (the server embeds the language's script catalogue in every page), or the English as is.
// Values go in by name: `tunedeckWords("Download {name} (zip)", { name: name })`; a translation may move them.
window.tunedeckWords = (function () {
  let words = null;
  return function (message, values) {
    if (words === null) {
      const embedded = document.getElementById("script-words");
      try { words = embedded ? JSON.parse(embedded.textContent) : {}; } catch (broken) { words = {}; }
    }
    const text = Object.prototype.hasOwnProperty.call(words, message) ? words[message] : message;
    if (!values) return text;
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole;
    });
  };
})();
