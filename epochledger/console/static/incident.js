// The incident page's picture, explored (docs/console.md, "Incident"): no framework,
// no other host. The server draws every picture (replay/timeline.py); this script only
// chooses which one: a zoom, a pan, a brushed interval and the cursor are each a new URL
// of the page (from, to, at), which console.js fetches and swaps into #picture, as it
// does after each commit of the live stream. Without it the page is the same picture,
// chosen with the GET form.
(function () {
  "use strict";
  var picture = document.getElementById("picture");
  if (!picture || !window.fetch || !window.URLSearchParams) { return; }
  var MIN_SPAN = 10000; // ms: the narrowest window
  var brush = null; // {from: ms, key: true when made with the keyboard}
  var keep_focus = false;

  function svg() { return picture.querySelector("svg.timeline"); }
  function params() { return new URLSearchParams(window.location.search); }
  function window_now() {
    // The window asked for (the URL's from and to), else the one drawn (data-lo, data-hi).
    var s = svg(), q = params();
    var lo = Date.parse(q.get("from") || ""), hi = Date.parse(q.get("to") || "");
    if (isNaN(lo)) { lo = Date.parse(s.getAttribute("data-lo")); }
    if (isNaN(hi)) { hi = Date.parse(s.getAttribute("data-hi")); }
    return { lo: lo, hi: hi };
  }
  function iso(ms) { return new Date(ms).toISOString().slice(0, 19) + "Z"; }
  function cursor_now() { var at = Date.parse(params().get("at") || ""); return isNaN(at) ? null : at; }

  function show(changes, push) {
    var q = params();
    Object.keys(changes).forEach(function (k) {
      if (changes[k] === null) { q.delete(k); } else { q.set(k, changes[k]); }
    });
    var url = window.location.pathname + "?" + q.toString();
    if (push) { history.pushState(null, "", url); } else { history.replaceState(null, "", url); }
    fill_form();
    document.dispatchEvent(new CustomEvent("epochledger:refresh"));
  }
  function fill_form() {
    var q = params();
    ["from", "to", "at"].forEach(function (name) {
      var input = document.querySelector("form.window input[name=" + name + "]");
      if (input) { input.value = q.get(name) || ""; }
    });
  }
  // Each window is a URL of its own (Back returns to the one before), but the wheel's
  // events, one after another, replace the URL the first of them made rather than stack.
  var wheeling = false;
  function zoom_to(lo, hi, gesture) {
    if (hi < lo) { var t = lo; lo = hi; hi = t; }
    if (hi - lo < MIN_SPAN) { var mid = (lo + hi) / 2; lo = mid - MIN_SPAN / 2; hi = mid + MIN_SPAN / 2; }
    var push = !(gesture && wheeling);
    wheeling = !!gesture;
    show({ from: iso(Math.floor(lo / 1000) * 1000), to: iso(Math.ceil(hi / 1000) * 1000) }, push);
  }
  function zoom(factor, around, gesture) {
    var w = window_now();
    if (around === null || around === undefined) { around = cursor_now(); }
    if (around === null || around < w.lo || around > w.hi) { around = (w.lo + w.hi) / 2; }
    zoom_to(around - (around - w.lo) * factor, around + (w.hi - around) * factor, gesture);
  }
  function pan(fraction, gesture) {
    var w = window_now(), by = (w.hi - w.lo) * fraction;
    zoom_to(w.lo + by, w.hi + by, gesture);
  }
  function whole() { wheeling = false; show({ from: null, to: null }, true); }
  function place(ms) { show({ at: iso(Math.round(ms / 1000) * 1000) }, false); }

  // A pointer's instant: where it is in the SVG's own units, through the drawn window.
  function x_at(ev) {
    var s = svg(), pt = s.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    return pt.matrixTransform(s.getScreenCTM().inverse()).x;
  }
  function time_at(x) {
    var s = svg(), left = +s.getAttribute("data-left"), width = +s.getAttribute("data-width");
    var lo = Date.parse(s.getAttribute("data-lo")), hi = Date.parse(s.getAttribute("data-hi"));
    var f = Math.max(0, Math.min(1, (x - left) / width));
    return lo + f * (hi - lo);
  }
  function x_of(ms) {
    var s = svg(), left = +s.getAttribute("data-left"), width = +s.getAttribute("data-width");
    var lo = Date.parse(s.getAttribute("data-lo")), hi = Date.parse(s.getAttribute("data-hi"));
    return left + Math.max(0, Math.min(1, (ms - lo) / (hi - lo))) * width;
  }
  function draw_brush(x0, x1) {
    var s = svg(), r = s.querySelector("rect.brush");
    if (!r) {
      r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      r.setAttribute("class", "brush");
      s.appendChild(r);
    }
    r.setAttribute("x", String(Math.min(x0, x1)));
    r.setAttribute("width", String(Math.max(Math.abs(x1 - x0), 1)));
    r.setAttribute("y", "0");
    r.setAttribute("height", s.getAttribute("height"));
  }
  function clear_brush() {
    brush = null;
    var r = svg() && svg().querySelector("rect.brush");
    if (r) { r.remove(); }
    say_keys();
  }

  // The mouse: a click places the cursor, a drag brushes an interval and zooms to it,
  // the wheel zooms around the pointer (with Shift, or sideways, it pans).
  var down = null;
  picture.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0 || !svg() || !svg().contains(ev.target)) { return; }
    down = { x: x_at(ev), moved: false };
    ev.preventDefault();
  });
  document.addEventListener("pointermove", function (ev) {
    if (!down) { return; }
    var x = x_at(ev);
    if (Math.abs(x - down.x) >= 5) { down.moved = true; }
    if (down.moved) { draw_brush(down.x, x); }
  });
  document.addEventListener("pointerup", function (ev) {
    if (!down) { return; }
    var start = down, x = x_at(ev);
    down = null;
    if (start.moved) { clear_brush(); zoom_to(time_at(start.x), time_at(x)); } else { place(time_at(x)); }
  });
  picture.addEventListener("wheel", function (ev) {
    if (!svg() || !svg().contains(ev.target)) { return; }
    ev.preventDefault();
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      pan((ev.shiftKey ? ev.deltaY : ev.deltaX) / 1000, true);
    } else {
      zoom(Math.pow(1.002, ev.deltaY), time_at(x_at(ev)), true);
    }
  }, { passive: false });

  // The keyboard, on the focused picture.
  function on_key(ev) {
    var w = window_now(), span = w.hi - w.lo, at = cursor_now();
    if (at === null || at < w.lo || at > w.hi) { at = (w.lo + w.hi) / 2; }
    var step = span / (ev.shiftKey ? 10 : 100);
    switch (ev.key) {
      case "ArrowLeft": place(at - step); break;
      case "ArrowRight": place(at + step); break;
      case "Home": place(w.lo); break;
      case "End": place(w.hi); break;
      case "+": case "=": zoom(0.5); break;
      case "-": case "_": zoom(2); break;
      case "PageUp": pan(-0.5); break;
      case "PageDown": pan(0.5); break;
      case "0": whole(); break;
      case "b": case "B": case "Enter":
        if (brush) { var from = brush.from; clear_brush(); zoom_to(from, at); }
        else if (ev.key !== "Enter") { brush = { from: at }; say_keys(); }
        else { return; }
        break;
      case "Escape": if (!brush) { return; } clear_brush(); break;
      default: return;
    }
    ev.preventDefault();
  }

  var keys = document.createElement("p");
  keys.id = "incident-keys";
  keys.className = "keys";
  function say_keys() {
    keys.textContent = brush
      ? "Brushing from " + iso(brush.from) + ": move the cursor, then B or Enter zooms to the interval, Escape cancels."
      : "On the picture: click to place the cursor, drag to zoom to an interval, wheel to zoom (Shift: pan). " +
        "Keys: arrows move the cursor (Shift: further), Home/End to the edges, + and - zoom, " +
        "PageUp/PageDown pan, B at two cursor places zooms to the interval between, 0 the whole history.";
  }
  function enhance() {
    var s = svg();
    if (!s) { return; }
    s.setAttribute("tabindex", "0");
    s.setAttribute("role", "application");
    s.setAttribute("aria-label", "incident timeline, " + iso(Date.parse(s.getAttribute("data-lo"))) + " to " +
      iso(Date.parse(s.getAttribute("data-hi"))));
    s.setAttribute("aria-describedby", "incident-keys");
    s.addEventListener("keydown", on_key);
    if (brush) { draw_brush(x_of(brush.from), x_of(cursor_now() === null ? brush.from : cursor_now())); }
    var active = document.activeElement;
    if (keep_focus && (!active || active === document.body)) { s.focus(); }
  }

  var bar = document.createElement("div");
  bar.className = "toolbar";
  bar.setAttribute("role", "toolbar");
  bar.setAttribute("aria-label", "the picture's window");
  [["Zoom in", function () { zoom(0.5); }], ["Zoom out", function () { zoom(2); }],
   ["Earlier", function () { pan(-0.5); }], ["Later", function () { pan(0.5); }],
   ["Whole history", whole]].forEach(function (b) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = b[0];
    button.addEventListener("click", b[1]);
    bar.appendChild(button);
  });
  say_keys();
  picture.parentNode.insertBefore(bar, picture);
  picture.parentNode.insertBefore(keys, picture);
  // The focus stays on the picture across its swaps (a swapped-out picture takes the
  // focus with it): it was there when the user last moved it (focusin) and the user has
  // not pressed anywhere else since.
  document.addEventListener("focusin", function (ev) { keep_focus = ev.target === svg(); });
  document.addEventListener("pointerdown", function (ev) { if (!svg() || !svg().contains(ev.target)) { keep_focus = false; } });
  document.addEventListener("epochledger:refreshed", enhance);
  window.addEventListener("popstate", function () {
    fill_form();
    document.dispatchEvent(new CustomEvent("epochledger:refresh"));
  });
  enhance();
})();
