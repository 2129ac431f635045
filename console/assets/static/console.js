// pgimageai console: the one script of the console, served from its own
// origin (the Content-Security-Policy allows no inline script). A page whose
// body has data-refresh="N" fetches itself every N seconds while it is
// visible and swaps in the new <main>; the server renders every value as
// text, and DOMParser runs no script of what it parses.
"use strict";

// A thumbnail the console cannot make (the row is gone, its image does not
// decode, or the console may not read it) answers 404: show a plain box
// instead of a broken image.
(function () {
  function noPreview(img) {
    var d = document.createElement("div");
    d.className = "noimg";
    d.textContent = "no preview";
    img.replaceWith(d);
  }
  document.addEventListener("error", function (e) {
    if (e.target && e.target.tagName === "IMG") {
      noPreview(e.target);
    }
  }, true);
  Array.prototype.forEach.call(document.images, function (img) {
    if (img.complete && img.naturalWidth === 0) {
      noPreview(img);
    }
  });
})();

(function () {
  var secs = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!(secs > 0)) {
    return;
  }
  var busy = false;
  function poll() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var here = document.getElementById("main");
        if (fresh && here) {
          here.replaceWith(document.adoptNode(fresh));
        }
      })
      .catch(function () { /* the next poll tries again */ })
      .finally(function () { busy = false; });
  }
  window.setInterval(poll, secs * 1000);
})();
