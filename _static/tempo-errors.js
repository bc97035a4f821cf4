// Records console errors, uncaught exceptions and rejected promises on the page's <html>
// element (data-tempo-errors), so the headless-browser test can read them from the DOM.
(function () {
  var errs = [];
  function note(m) {
    errs.push(String(m));
    document.documentElement.setAttribute("data-tempo-errors", JSON.stringify(errs));
  }
  var orig = console.error;
  console.error = function () {
    note(Array.prototype.join.call(arguments, " "));
    return orig.apply(console, arguments);
  };
  window.addEventListener("error", function (e) { note("uncaught: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) { note("unhandled rejection: " + e.reason); });
})();
