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
        var before = {};
        el.querySelectorAll("[data-hold]").forEach(function (n) { before[n.getAttribute("data-hold")] = true; });
        el.innerHTML = html;
        el.querySelectorAll("tr[data-hold]").forEach(function (n) {
          if (!before[n.getAttribute("data-hold")]) n.classList.add("new");
        });
      });
  }

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
