// The console's live parts (docs/console.md, "Live"): no framework, no other host.
// A page whose parts carry data-live subscribes to the ledger's live stream
// (/v1/stream, Server-Sent Events) and, after each commit, fetches its own URL again
// and swaps those parts in, so it shows the present without a reload. Another script
// of the page asks for the same refresh with the event "epochledger:refresh" (the
// incident page, after it chose a new URL), and hears "epochledger:refreshed" after.
(function () {
  "use strict";
  var parts = document.querySelectorAll("[data-live]");
  var state = document.getElementById("live-state");
  if (!parts.length) { return; }
  var pending = false, again = false;
  function say(text) { if (state) { state.textContent = text; } }
  function refresh() {
    if (pending) { again = true; return; }
    pending = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var next = fresh.getElementById(el.id);
          if (next) { el.replaceChildren.apply(el, Array.prototype.slice.call(next.childNodes).map(function (n) { return document.importNode(n, true); })); }
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
        document.dispatchEvent(new CustomEvent("epochledger:refreshed"));
        say("live: updated " + new Date().toISOString().slice(11, 19) + " UTC");
      })
      .catch(function (e) { say("live: refresh failed (" + e.message + ")"); })
      .then(function () { pending = false; if (again) { again = false; refresh(); } });
  }
  document.addEventListener("epochledger:refresh", refresh);
  if (!window.EventSource) { return; }
  var source = new EventSource("/v1/stream");
  source.onopen = function () { say("live"); document.body.setAttribute("data-live-open", "1"); };
  source.onmessage = function () { refresh(); };
  source.onerror = function () { say("live: reconnecting"); };
})();
