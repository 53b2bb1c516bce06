// The colour theme: the one chosen with the top bar's button (kept in this browser), else the system's.
// Loaded before the page is drawn, so a dark page never flashes light.
(function () {
  "use strict";
  const KEY = "tunedeck-theme";
  const ORDER = ["system", "light", "dark"];
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function chosen() {
    let choice = null;
    try { choice = window.localStorage.getItem(KEY); } catch (blocked) { choice = null; }
    return ORDER.indexOf(choice) === -1 ? "system" : choice;
  }

  function apply() {
    const choice = chosen();
    const dark = choice === "dark" || (choice === "system" && !!media && media.matches);
    document.documentElement.dataset.theme = dark ? "dark" : "light";
    const button = document.getElementById("theme-toggle");
    if (button) {
      const t = window.tunedeckWords;
      button.textContent = { system: t("Theme: system"), light: t("Theme: light"), dark: t("Theme: dark") }[choice];
      button.title = t("Colour theme: system (as this device), light or dark; click to change");
    }
  }

  apply();
  if (media && media.addEventListener) media.addEventListener("change", apply);
  document.addEventListener("DOMContentLoaded", function () {
    apply();
    const button = document.getElementById("theme-toggle");
    if (!button) return;
    button.addEventListener("click", function () {
      const next = ORDER[(ORDER.indexOf(chosen()) + 1) % ORDER.length];
      try { window.localStorage.setItem(KEY, next); } catch (blocked) { /* private mode: this page only */ }
      apply();
      document.dispatchEvent(new CustomEvent("tunedeck:theme")); // charts redraw in the new colours
    });
  });
})();
