// Landform UI: live updates over server-sent events (a watch on the API
// server, not polling), and a confirmation before approving a destructive
// plan. The pages work without it; nothing is fetched from elsewhere.
"use strict";
(function () {
  function follow(el, handlers) {
    var url = el.getAttribute("data-stream");
    if (!url || !window.EventSource) return;
    var es = new EventSource(url);
    Object.keys(handlers).forEach(function (name) {
      es.addEventListener(name, function (e) { handlers[name](e.data); });
    });
  }

  var table = document.getElementById("objects");
  if (table) {
    var body = table.tBodies[0];
    follow(table, {
      row: function (data) {
        var m = JSON.parse(data);
        var tmp = document.createElement("tbody");
        tmp.innerHTML = m.html;
        var row = tmp.firstElementChild;
        var old = document.getElementById("row-" + m.key);
        if (old) { old.replaceWith(row); return; }
        var empty = body.querySelector("tr.empty");
        if (empty) empty.remove();
        var next = Array.prototype.find.call(body.rows, function (r) { return r.dataset.key > m.key; });
        body.insertBefore(row, next || null);
      },
      gone: function (key) {
        var old = document.getElementById("row-" + key);
        if (old) old.remove();
      },
      reload: function () { window.location.reload(); }
    });
  }

  var live = document.getElementById("live");
  if (live) {
    follow(live, {
      live: function (data) { live.innerHTML = JSON.parse(data).html; },
      logs: function (data) {
        var logs = document.getElementById("logs");
        if (logs) logs.innerHTML = JSON.parse(data).html;
      }
    });
  }

  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm"))) e.preventDefault();
    });
  });
})();
