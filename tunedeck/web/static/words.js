"use strict";
// The page's words for its scripts: `tunedeckWords("Theme: dark")` is that message in the page's
// language (the server embeds the language's script catalogue in every page), or the English as is.
window.tunedeckWords = (function () {
  let words = null;
  return function (message) {
    if (words === null) {
      const embedded = document.getElementById("script-words");
      try { words = embedded ? JSON.parse(embedded.textContent) : {}; } catch (broken) { words = {}; }
    }
    return Object.prototype.hasOwnProperty.call(words, message) ? words[message] : message;
  };
})();
