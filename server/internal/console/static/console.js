// Live updates for the console. Every page works without this script; with
// it, parts marked data-live re-render from the server when a hold event
// arrives on /events (Approvals.Watch as the signed-in user).
(function () {
  "use strict";
  var live = document.querySelectorAll("[data-live]");
  var badge = document.getElementById("live");
  if (!live.length || !window.EventSource) return;

  function refresh(el) {
    return fetch(el.getAttribute("data-live"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        // Parsed and serialized by the browser, so an unchanged part
        // compares equal and is left alone (no flicker, nothing lost).
        var next = document.createElement("template");
        next.innerHTML = html;
        if (next.innerHTML === el.innerHTML) return;
        var before = {};
        el.querySelectorAll("[data-hold]").forEach(function (n) { before[n.getAttribute("data-hold")] = true; });
        var typed = keepTyped(el);
        el.innerHTML = next.innerHTML;
        typed(el);
        el.querySelectorAll("tr[data-hold]").forEach(function (n) {
          if (!before[n.getAttribute("data-hold")]) n.classList.add("new");
        });
      });
  }

  // keepTyped remembers what the user typed into el's text fields (a
  // reject reason) and where the focus was; the returned function puts
  // both back into the re-rendered part.
  function keepTyped(el) {
    var values = {}, focused = null;
    function key(n) { return (n.form ? n.form.getAttribute("action") + "|" + n.form.className : "") + "|" + n.name; }
    el.querySelectorAll("input[type=text], textarea").forEach(function (n) {
      if (n.value) values[key(n)] = n.value;
      if (n === document.activeElement) focused = key(n);
    });
    return function (el) {
      el.querySelectorAll("input[type=text], textarea").forEach(function (n) {
        var k = key(n);
        if (values[k] !== undefined) n.value = values[k];
        if (k === focused) n.focus();
      });
    };
  }

  // Re-renders every live part now (the browser test; a console user
  // never needs it: events do it).
  window.clawguardRefresh = function () { return Promise.all(Array.prototype.map.call(live, refresh)); };

  var es = new EventSource("/events");
  es.addEventListener("open", function () {
    if (badge) { badge.textContent = "live"; badge.classList.remove("off"); badge.classList.add("on"); }
    // The stream opens once subscribed: whatever changed between rendering
    // the page and now is fetched once; events carry the rest.
    live.forEach(refresh);
  });
  es.addEventListener("error", function () {
    if (badge) { badge.textContent = "reconnecting"; badge.classList.remove("on"); badge.classList.add("off"); }
  });
  es.addEventListener("hold", function (e) {
    var ev = JSON.parse(e.data);
    live.forEach(function (el) {
      var only = el.getAttribute("data-hold");
      if (!only || only === ev.hold) refresh(el);
    });
  });

  // An approved hold's page follows the decision log until the replay's
  // answer (a decision, not a hold event) is there.
  setInterval(function () {
    live.forEach(function (el) { if (el.querySelector("[data-waiting]")) refresh(el); });
  }, 1000);
})();
