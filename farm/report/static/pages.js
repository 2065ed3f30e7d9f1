// modelfarm report, a report cut into pages (farm.report.pages): the search and the filters reach the
// traces of every page. The compact rows of all traces are in pages/rows-N.js (each calls farmRows(N, rows));
// they are loaded one file after another, only while a search or a filter is set, and no further than the
// page's match limit. Rows are written into the list with textContent and attributes only, never as markup.
(function () {
  "use strict";

  var body = document.body;
  var pages = Number(body.getAttribute("data-pages")) || 1;
  if (pages <= 1) {
    return;
  }
  var root = body.getAttribute("data-root") || "";
  var files = Number(body.getAttribute("data-row-files")) || 0;
  var limit = Number(body.getAttribute("data-match-limit")) || 500;
  var total = Number(body.getAttribute("data-total")) || 0;
  var loaded = {};
  var waiting = {};
  var generation = 0;

  window.farmRows = function (n, rows) {
    loaded[n] = rows;
    (waiting[n] || []).forEach(function (done) { done(); });
    delete waiting[n];
  };

  function load(n, done, failed) {
    if (loaded[n]) {
      done();
      return;
    }
    if (waiting[n]) {
      waiting[n].push(done);
      return;
    }
    waiting[n] = [done];
    var script = document.createElement("script");
    script.src = root + "pages/rows-" + n + ".js";
    script.onerror = function () {
      delete waiting[n];
      failed(n);
    };
    document.head.appendChild(script);
  }

  function pageUrl(page) {
    return page === 1 ? root + "index.html" : root + "pages/" + page + ".html";
  }

  function criteria() {
    var wanted = {};
    var all = true;
    Array.prototype.forEach.call(document.querySelectorAll("#status-filter input[type=checkbox]"), function (box) {
      wanted[box.value] = box.checked;
      all = all && box.checked;
    });
    var select = document.getElementById("model-filter");
    var search = document.getElementById("search");
    return { wanted: wanted, all: all, model: select ? select.value : "",
             query: search ? search.value.trim().toLowerCase() : "" };
  }

  function matches(c, row) {
    return c.wanted[row[1]] !== false && (!c.model || row[3] === c.model) &&
      (!c.query || row[0].toLowerCase().indexOf(c.query) >= 0);
  }

  function addRow(tbody, row) {
    var tr = document.createElement("tr");
    tr.className = "row match";
    tr.setAttribute("data-key", row[0]);
    tr.setAttribute("data-status", row[1]);
    var badge = document.createElement("span");
    badge.className = "badge status-" + row[1];
    badge.textContent = row[2];
    var link = document.createElement("a");
    link.href = pageUrl(row[4]) + "#" + row[5];
    var code = document.createElement("code");
    code.textContent = row[0];
    link.appendChild(code);
    [badge, link, String(row[4]), row[6], row[7]].forEach(function (content, i) {
      var td = document.createElement("td");
      if (i === 1) {
        td.className = "key";
      }
      if (i >= 3) {
        td.className = "num";
      }
      if (typeof content === "string") {
        td.textContent = content;
      } else {
        td.appendChild(content);
      }
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  }

  function search() {
    var c = criteria();
    var section = document.getElementById("all-matches");
    var tbody = section.querySelector("tbody");
    var counter = document.getElementById("all-matches-count");
    var mine = ++generation;
    while (tbody.firstChild) {
      tbody.removeChild(tbody.firstChild);
    }
    if (c.all && !c.model && !c.query) {
      section.hidden = true;
      body.removeAttribute("data-searched");
      return;
    }
    section.hidden = false;
    var found = 0;
    var seen = 0;
    function finish(text) {
      counter.textContent = text;
      body.setAttribute("data-searched", String(mine));
    }
    function next(n) {
      if (mine !== generation) {
        return;  // a newer search started
      }
      if (n > files) {
        finish(found + " of " + total + " traces match");
        return;
      }
      counter.textContent = found + " so far (searched " + seen + " of " + total + " traces)";
      load(n, function () {
        if (mine !== generation) {
          return;
        }
        var rows = loaded[n];
        for (var i = 0; i < rows.length; i += 1) {
          seen += 1;
          if (matches(c, rows[i])) {
            found += 1;
            addRow(tbody, rows[i]);
            if (found >= limit) {
              finish("the first " + limit + " matches (searched " + seen + " of " + total +
                     " traces); narrow the search to see the others");
              return;
            }
          }
        }
        next(n + 1);
      }, function (missing) {
        finish("pages/rows-" + missing + ".js could not be loaded: " + found + " matches in the " + seen +
               " traces searched");
      });
    }
    next(1);
  }

  var timer = null;
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(search, 150);
  }
  Array.prototype.forEach.call(document.querySelectorAll("#status-filter input[type=checkbox]"), function (box) {
    box.addEventListener("change", soon);
  });
  var select = document.getElementById("model-filter");
  if (select) {
    select.addEventListener("change", soon);
  }
  var input = document.getElementById("search");
  if (input) {
    input.addEventListener("input", soon);
  }
}());
