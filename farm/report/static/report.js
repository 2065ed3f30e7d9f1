// modelfarm report: the compact list (one row per trace; a click opens its card), cards that fold
// (passed ones start folded), views (side by side, swap on hover, slider, onion skin), filters, zoom,
// filmstrips (one selected frame per strip, shown in both rows and the big pair; play flips through them in step),
// and under `farm serve` the Approve / Reject / Undo buttons and bulk decisions on selected rows. No network besides `farm serve`'s own
// /api/ endpoints; nothing read from the page is ever inserted as markup (textContent only).
(function () {
  "use strict";

  var VIEWS = ["side", "swap", "slider", "onion"];

  function all(selector, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(selector));
  }

  var sections = all("section.trace");
  var rows = all("#trace-list tr.row");
  var strips = all("section.filmstrip");
  var PLAY_MS = 700;
  var WATCH_MS = 3000;  // how often `farm serve`'s page asks whether the goldens changed elsewhere
  var timers = {};

  function sectionOf(key) {
    return sections.filter(function (s) { return s.getAttribute("data-key") === key; })[0] || null;
  }

  function rowOf(key) {
    return rows.filter(function (r) { return r.getAttribute("data-key") === key; })[0] || null;
  }

  function setCollapsed(section, collapsed) {
    if (collapsed) {
      section.setAttribute("data-collapsed", "1");
    } else {
      section.removeAttribute("data-collapsed");
    }
    var toggle = section.querySelector("button.toggle");
    if (toggle) {
      toggle.setAttribute("aria-expanded", String(!collapsed));
      toggle.textContent = collapsed ? "+" : "\u2212";
    }
  }

  function openCard(key) {
    var section = sectionOf(key);
    if (!section) {
      return;
    }
    sections.forEach(function (s) { s.classList.remove("focused"); });
    section.hidden = false;
    setCollapsed(section, false);
    section.classList.add("focused");
    section.scrollIntoView({ block: "start" });
  }

  function pressed(buttons, view) {
    buttons.forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-view") === view));
    });
  }

  function setView(section, view) {
    if (VIEWS.indexOf(view) < 0) {
      return;
    }
    section.setAttribute("data-view", view);
    pressed(all(".view-buttons button", section), view);
  }

  function setAllViews(view) {
    sections.forEach(function (s) { setView(s, view); });
    pressed(all("#views button"), view);
    document.body.setAttribute("data-view", view);
  }

  function applyFilters() {
    var wanted = {};
    all("#status-filter input[type=checkbox]").forEach(function (box) {
      wanted[box.value] = box.checked;
    });
    var select = document.getElementById("model-filter");
    var model = select ? select.value : "";
    var search = document.getElementById("search");
    var query = search ? search.value.trim().toLowerCase() : "";
    var shown = 0;
    function found(text) {
      return !query || (text || "").toLowerCase().indexOf(query) >= 0;
    }
    function visible(el) {
      return wanted[el.getAttribute("data-status")] !== false && (!model || el.getAttribute("data-model") === model) &&
        found(el.getAttribute("data-key"));
    }
    sections.forEach(function (s) {
      var ok = visible(s);
      s.hidden = !ok;
      if (ok) {
        shown += 1;
      }
    });
    rows.forEach(function (r) { r.hidden = !visible(r); });
    strips.forEach(function (strip) {
      var some = (strip.getAttribute("data-statuses") || "").split(" ").some(function (st) {
        return wanted[st] !== false;
      });
      strip.hidden = !(some && (!model || strip.getAttribute("data-model") === model) &&
        found(strip.getAttribute("data-strip")));
    });
    var counter = document.getElementById("shown-count");
    if (counter) {
      counter.textContent = shown + " of " + sections.length + " traces shown";
    }
  }

  function applyZoom(zoom) {
    all("img[data-w]").forEach(function (img) {
      img.style.width = Number(img.getAttribute("data-w")) * zoom + "px";
      img.style.height = Number(img.getAttribute("data-h")) * zoom + "px";
    });
    all(".slider-input, .onion-input").forEach(function (input) {
      var img = input.parentNode.querySelector("img[data-w]");
      if (img) {
        input.style.width = Number(img.getAttribute("data-w")) * zoom + "px";
      }
    });
  }

  function setSlider(input) {
    var stack = input.parentNode.querySelector(".stack");
    var over = stack && stack.querySelector("img.over");
    if (over) {
      over.style.clipPath = "inset(0 " + (100 - Number(input.value)) + "% 0 0)";
    }
  }

  function setOnion(input) {
    var stack = input.parentNode.querySelector(".stack");
    var over = stack && stack.querySelector("img.over");
    if (over) {
      over.style.opacity = String(Number(input.value) / 100);
    }
  }

  function showSwap(area, showNew) {
    area.classList.toggle("showing-new", showNew);
    var caption = area.parentNode.querySelector(".swap-caption");
    if (caption) {
      var labels = document.body.getAttribute("data-kind") === "diff" ? ["base", "head"] : ["golden", "new"];
      caption.textContent = showNew ? labels[1] + " frame (leave to see the " + labels[0] + ")"
        : labels[0] + " (hover to see the " + labels[1] + " frame)";
    }
  }

  // --- filmstrips: one shared index per strip; both rows, the big pair and the caption follow it

  function stripColumns(strip) {
    return all("thead th.strip-col", strip);
  }

  function selectedFrame(strip) {
    return Number(strip.getAttribute("data-selected")) || 0;
  }

  function selectFrame(strip, index) {
    var cols = stripColumns(strip);
    if (!cols.length) {
      return;
    }
    var i = ((index % cols.length) + cols.length) % cols.length;
    var col = cols[i];
    strip.setAttribute("data-selected", String(i));
    all("th.strip-col, td.strip-cell", strip).forEach(function (el) {
      el.classList.toggle("current", Number(el.getAttribute("data-index")) === i);
    });
    all("img.strip-big-img", strip).forEach(function (img) {
      var src = col.getAttribute("data-" + img.getAttribute("data-row") + "-src");
      img.hidden = !src;
      if (src) {
        img.setAttribute("src", src);
      } else {
        img.removeAttribute("src");
      }
      var none = img.parentNode.querySelector(".none");
      if (none) {
        none.hidden = Boolean(src);
      }
    });
    var now = strip.querySelector(".strip-now");
    if (now) {
      now.textContent = "frame " + (i + 1) + " of " + cols.length + ": " + col.getAttribute("data-time") + ", "
        + col.getAttribute("data-label") + (col.getAttribute("data-worst") ? " (worst)" : "");
    }
  }

  function stopStrip(strip) {
    if (timers[strip.id]) {
      clearInterval(timers[strip.id]);
      delete timers[strip.id];
    }
    strip.removeAttribute("data-playing");
    var button = strip.querySelector("button.strip-play");
    if (button) {
      button.setAttribute("aria-pressed", "false");
      button.textContent = "play";
    }
  }

  function playStrip(strip) {
    stopStrip(strip);
    strip.setAttribute("data-playing", "1");
    var button = strip.querySelector("button.strip-play");
    if (button) {
      button.setAttribute("aria-pressed", "true");
      button.textContent = "pause";
    }
    timers[strip.id] = setInterval(function () { selectFrame(strip, selectedFrame(strip) + 1); }, PLAY_MS);
  }

  // A frame's status changed (a decision under `farm serve`): its cells and column in every strip.
  function refreshStripFrame(key, status, label) {
    all("section.filmstrip [data-trace]").forEach(function (el) {
      if (el.getAttribute("data-trace") !== key || el.tagName === "A") {
        return;
      }
      el.setAttribute("data-status", status);
      if (el.tagName === "TH") {
        el.setAttribute("data-label", label);
        return;
      }
      el.className = el.className.replace(/\bstatus-\S+/, "status-" + status);
      setBadge(el.querySelector(".badge"), status, label);
    });
  }

  function wireStrip(strip) {
    function step(delta) {
      stopStrip(strip);
      selectFrame(strip, selectedFrame(strip) + delta);
    }
    strip.querySelector("button.strip-prev").addEventListener("click", function () { step(-1); });
    strip.querySelector("button.strip-next").addEventListener("click", function () { step(1); });
    strip.querySelector("button.strip-play").addEventListener("click", function () {
      if (strip.getAttribute("data-playing") === "1") {
        stopStrip(strip);
      } else {
        playStrip(strip);
      }
    });
    var worst = strip.querySelector("button.strip-worst");
    if (worst) {
      worst.addEventListener("click", function () {
        stopStrip(strip);
        selectFrame(strip, Number(strip.getAttribute("data-worst")));
      });
    }
    all("th.strip-col, td.strip-cell", strip).forEach(function (el) {
      el.addEventListener("click", function (event) {
        var link = event.target.closest("a.strip-card");
        if (link) {
          event.preventDefault();
          openCard(link.getAttribute("data-trace"));
          return;
        }
        stopStrip(strip);
        selectFrame(strip, Number(el.getAttribute("data-index")));
      });
    });
    var approve = strip.querySelector("button.strip-approve");
    if (approve) {
      approve.addEventListener("click", function () {
        var keys = all("td.strip-cell[data-approvable='1']", strip).map(function (c) {
          return c.getAttribute("data-trace");
        });
        bulk({ action: "approve", keys: keys }, approve, strip.querySelector(".strip-result"));
      });
    }
    var toggle = strip.querySelector("button.toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        setCollapsed(strip, strip.getAttribute("data-collapsed") !== "1");
      });
    }
  }

  // --- `farm serve`: decisions go to the server, which updates the golden index

  function post(path, body) {
    var token = document.body.getAttribute("data-token") || "";
    return fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Farm-Token": token },
      body: JSON.stringify(body),
      cache: "no-store",
    }).then(function (response) {
      return response.json().then(function (data) {
        data.httpStatus = response.status;
        return data;
      });
    });
  }

  // Refresh the header's verdict and counts from a server answer ({"head": counts_view}).
  function refreshHead(head) {
    if (!head) {
      return;
    }
    var verdict = document.getElementById("verdict");
    verdict.className = "verdict verdict-" + head.verdict;
    document.getElementById("verdict-word").textContent = head.word;
    var counts = document.getElementById("counts");
    while (counts.firstChild) {
      counts.removeChild(counts.firstChild);
    }
    head.counts.forEach(function (c, i) {
      if (i) {
        counts.appendChild(document.createTextNode(", "));
      }
      var span = document.createElement("span");
      span.className = "count status-" + c[0];
      span.textContent = c[1] + " " + c[2];
      counts.appendChild(span);
    });
    document.getElementById("total").textContent = String(head.total);
    document.getElementById("compared").textContent = String(head.compared);
    var failed = document.getElementById("failed-count");
    if (failed && typeof head.failed_with_image === "number") {
      failed.textContent = String(head.failed_with_image);
    }
    refreshList("problems", head.problems, function (li, p) { li.textContent = p; });
    refreshList("bulk-commands", head.commands, function (li, c) {
      li.appendChild(document.createTextNode(c[0] + ": "));
      var code = document.createElement("code");
      code.className = "cmd";
      code.textContent = c[1];
      li.appendChild(code);
    });
    refreshFilters(head.counts);
  }

  // A header list (the problems, the bulk commands) rebuilt from the server's items; hidden when empty.
  function refreshList(id, items, fill) {
    var list = document.getElementById(id);
    if (!list || !items) {
      return;
    }
    while (list.firstChild) {
      list.removeChild(list.firstChild);
    }
    items.forEach(function (item) {
      var li = document.createElement("li");
      fill(li, item);
      list.appendChild(li);
    });
    list.hidden = items.length === 0;
  }

  // The status filter's labels ("failed (4)") from the counts: a status that appeared gets a box
  // (checked), one that is gone loses its box; the boxes' choices are kept.
  function refreshFilters(counts) {
    var group = document.getElementById("status-filter");
    if (!group) {
      return;
    }
    var boxes = {};
    all("input[type=checkbox]", group).forEach(function (box) { boxes[box.value] = box; });
    var keep = {};
    counts.forEach(function (c) {
      keep[c[0]] = true;
      var box = boxes[c[0]];
      if (!box) {
        var label = document.createElement("label");
        box = document.createElement("input");
        box.type = "checkbox";
        box.value = c[0];
        box.checked = true;
        box.addEventListener("change", applyFilters);
        var text = document.createElement("span");
        text.className = "filter-label";
        label.appendChild(box);
        label.appendChild(document.createTextNode(" "));
        label.appendChild(text);
        group.appendChild(label);
      }
      box.parentNode.querySelector(".filter-label").textContent = c[2] + " (" + c[1] + ")";
    });
    Object.keys(boxes).forEach(function (s) {
      if (!keep[s]) {
        group.removeChild(boxes[s].parentNode);
      }
    });
    applyFilters();
  }

  // An answer from the server: the traces it names, the header, and the index digest the page is
  // now current with. `elsewhere`: traces that decisions made outside this page changed.
  function refreshFrom(data) {
    refreshTraces(data.statuses);
    refreshHead(data.head);
    if (data.digest !== undefined) {
      document.body.setAttribute("data-digest", data.digest || "");
    }
    if (data.elsewhere && data.elsewhere.length) {
      var stale = document.getElementById("stale");
      stale.textContent = data.elsewhere.length + " trace(s) changed by decisions made outside this page" +
        " (a farm approve or reject in a terminal): their statuses and the counts above are current;" +
        " reload the page to see their images.";
      stale.hidden = false;
    }
  }

  // Poll the server (while the page is visible) so a decision made in a terminal shows here.
  function watchState() {
    if (document.hidden) {
      return;
    }
    fetch("api/state", { cache: "no-store", credentials: "same-origin" }).then(function (response) {
      return response.ok ? response.json() : null;
    }).then(function (data) {
      if (data && (data.digest || "") !== (document.body.getAttribute("data-digest") || "")) {
        data.elsewhere = data.changed;
        refreshFrom(data);
      }
    }).catch(function () {
      return null;
    });
  }

  function setBadge(badge, status, label) {
    if (badge) {
      badge.textContent = label;
      badge.className = "badge status-" + status;
    }
  }

  // Statuses after a decision: {"statuses": {key: [status, label]}} from the server.
  function refreshTraces(statuses) {
    Object.keys(statuses || {}).forEach(function (key) {
      var st = statuses[key];
      var section = sectionOf(key);
      var row = rowOf(key);
      [section, row].forEach(function (el) {
        if (el) {
          el.setAttribute("data-status", st[0]);
          setBadge(el.querySelector(".badge"), st[0], st[1]);
        }
      });
      refreshStripFrame(key, st[0], st[1]);
    });
  }

  function selectedKeys() {
    return rows.filter(function (r) {
      var box = r.querySelector("input.select");
      return box && box.checked;
    }).map(function (r) { return r.getAttribute("data-key"); });
  }

  function showSelected() {
    var counter = document.getElementById("selected-count");
    if (counter) {
      counter.textContent = selectedKeys().length + " selected";
    }
  }

  function bulk(body, button, where) {
    var result = where || document.getElementById("bulk-result");
    var allowBlank = document.getElementById("allow-blank");
    body.allow_blank = Boolean(allowBlank && allowBlank.checked);
    button.disabled = true;
    result.textContent = body.action === "approve" ? "approving..." : "rejecting...";
    post("api/bulk", body).then(function (data) {
      result.textContent = data.message || (data.ok ? "done" : "failed");
      refreshFrom(data);
      if (data.ok) {
        Object.keys(data.statuses || {}).forEach(function (key) {
          var row = rowOf(key);
          var box = row && row.querySelector("input.select");
          if (box) {
            box.checked = false;
          }
          var section = sectionOf(key);
          if (section) {
            section.setAttribute("data-decided", body.action);
          }
        });
      }
      showSelected();
    }).catch(function (err) {
      result.textContent = "the server did not answer: " + err;
    }).then(function () {
      button.disabled = false;
    });
  }

  function decide(section, action, button) {
    var result = section.querySelector(".action-result");
    var envOnly = section.querySelector("input.env-only");
    button.disabled = true;
    result.textContent = action === "approve" ? "approving..." : "rejecting...";
    post("api/" + action, { key: section.getAttribute("data-key"), env: Boolean(envOnly && envOnly.checked) })
      .then(function (data) {
        result.textContent = data.message || (data.ok ? "done" : "failed");
        refreshFrom(data);
        var row = rowOf(section.getAttribute("data-key"));
        if (row && data.status) {
          row.setAttribute("data-status", data.status);
          setBadge(row.querySelector(".badge"), data.status, data.label || data.status);
        }
        if (data.status) {
          refreshStripFrame(section.getAttribute("data-key"), data.status, data.label || data.status);
        }
        if (data.ok && data.status) {
          section.setAttribute("data-status", data.status);
          section.setAttribute("data-decided", action);
          var badge = section.querySelector(".badge");
          badge.textContent = action === "approve" ? "approved" : "rejected";
          badge.className = "badge status-" + (action === "approve" ? "pass" : "rejected");
        }
      })
      .catch(function (err) {
        result.textContent = "the server did not answer: " + err;
      })
      .then(function () {
        button.disabled = false;
      });
  }

  function undo(button) {
    var result = document.getElementById("undo-result");
    button.disabled = true;
    post("api/undo", {}).then(function (data) {
      result.textContent = data.message || "";
      refreshFrom(data);
    }).catch(function (err) {
      result.textContent = "the server did not answer: " + err;
    }).then(function () {
      button.disabled = false;
    });
  }

  // --- wiring

  all("#views button").forEach(function (b) {
    b.addEventListener("click", function () { setAllViews(b.getAttribute("data-view")); });
  });
  sections.forEach(function (section) {
    all(".view-buttons button", section).forEach(function (b) {
      b.addEventListener("click", function () { setView(section, b.getAttribute("data-view")); });
    });
    all(".swap-area", section).forEach(function (area) {
      area.addEventListener("mouseenter", function () { showSwap(area, true); });
      area.addEventListener("mouseleave", function () { showSwap(area, false); });
      area.addEventListener("focus", function () { showSwap(area, true); });
      area.addEventListener("blur", function () { showSwap(area, false); });
      area.addEventListener("click", function () { showSwap(area, !area.classList.contains("showing-new")); });
    });
    all(".slider-input", section).forEach(function (input) {
      input.addEventListener("input", function () { setSlider(input); });
      setSlider(input);
    });
    all(".onion-input", section).forEach(function (input) {
      input.addEventListener("input", function () { setOnion(input); });
      setOnion(input);
    });
    all(".actions button[data-action]", section).forEach(function (b) {
      b.addEventListener("click", function () { decide(section, b.getAttribute("data-action"), b); });
    });
  });
  strips.forEach(wireStrip);
  all("#status-filter input[type=checkbox]").forEach(function (box) {
    box.addEventListener("change", applyFilters);
  });
  rows.forEach(function (row) {
    row.addEventListener("click", function (event) {
      if (event.target.closest("input, button, a")) {
        return;
      }
      openCard(row.getAttribute("data-key"));
    });
    row.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        openCard(row.getAttribute("data-key"));
      }
    });
    var box = row.querySelector("input.select");
    if (box) {
      box.addEventListener("change", showSelected);
    }
  });
  sections.forEach(function (section) {
    var toggle = section.querySelector("button.toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        setCollapsed(section, section.getAttribute("data-collapsed") !== "1");
      });
    }
  });
  function byId(id) {
    return document.getElementById(id);
  }
  if (byId("bulk")) {
    byId("select-failed").addEventListener("click", function () {
      rows.forEach(function (r) {
        var box = r.querySelector("input.select");
        if (box) {
          box.checked = r.getAttribute("data-status") === "fail";
        }
      });
      showSelected();
    });
    byId("select-none").addEventListener("click", function () {
      all("#trace-list input.select").forEach(function (box) { box.checked = false; });
      showSelected();
    });
    ["bulk-approve", "bulk-reject"].forEach(function (id) {
      var button = byId(id);
      button.addEventListener("click", function () {
        var keys = selectedKeys();
        if (!keys.length) {
          byId("bulk-result").textContent = "select some traces first (the boxes in the list)";
          return;
        }
        bulk({ action: button.getAttribute("data-action"), keys: keys }, button);
      });
    });
    byId("approve-failed").addEventListener("click", function () {
      bulk({ action: "approve", status: "fail" }, byId("approve-failed"));
    });
  }
  var modelFilter = document.getElementById("model-filter");
  if (modelFilter) {
    modelFilter.addEventListener("change", applyFilters);
  }
  var searchBox = document.getElementById("search");
  if (searchBox) {
    searchBox.addEventListener("input", applyFilters);
  }
  var zoom = document.getElementById("zoom");
  if (zoom) {
    zoom.addEventListener("change", function () { applyZoom(Number(zoom.value)); });
  }
  var undoButton = document.getElementById("undo");
  if (undoButton) {
    undoButton.addEventListener("click", function () { undo(undoButton); });
  }
  applyZoom(Number(document.body.getAttribute("data-zoom")) || 1);
  applyFilters();
  if (document.body.getAttribute("data-mode") === "serve") {
    window.setInterval(watchState, WATCH_MS);
    document.addEventListener("visibilitychange", watchState);
  }
  document.body.setAttribute("data-ready", "1");
}());
