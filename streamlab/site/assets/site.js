// The search box: looks through window.SITE_SEARCH (assets/search-index.js: every section of every
// page, without outputs) for sections holding all the words typed. Works from a folder, no server.
(function () {
  "use strict";
  var box = document.getElementById("search");
  var list = document.getElementById("search-results");
  var entries = window.SITE_SEARCH || [];
  if (!box || !list) { return; }
  entries.forEach(function (e) { e.lower = (e.page + " " + e.heading + " " + e.text).toLowerCase(); });

  function snippet(text, word) {
    var at = Math.max(0, text.toLowerCase().indexOf(word) - 60);
    return (at > 0 ? "…" : "") + text.slice(at, at + 160) + (text.length > at + 160 ? "…" : "");
  }

  function show() {
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    list.textContent = "";
    if (!words.length) { list.hidden = true; return; }
    var hits = entries.filter(function (e) {
      return words.every(function (w) { return e.lower.indexOf(w) >= 0; });
    }).slice(0, 30);
    hits.forEach(function (e) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = e.url;
      a.textContent = e.heading || e.page;
      var where = document.createElement("div");
      where.className = "where";
      where.textContent = e.page;
      var text = document.createElement("div");
      text.className = "snippet";
      text.textContent = snippet(e.text, words[0]);
      li.appendChild(a); li.appendChild(where); li.appendChild(text);
      list.appendChild(li);
    });
    if (!hits.length) {
      var none = document.createElement("li");
      none.textContent = (box.dataset.nothing || "Nothing found for") + " “" + box.value + "”.";
      list.appendChild(none);
    }
    list.hidden = false;
  }

  box.addEventListener("input", show);
  box.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      var first = list.querySelector("a");
      if (first) { window.location.href = first.href; }
    } else if (event.key === "Escape") {
      box.value = ""; show();
    }
  });
  document.addEventListener("click", function (event) {
    if (!list.contains(event.target) && event.target !== box) { list.hidden = true; }
  });
})();
