// modelfarm report: views (side by side, swap on hover, slider, onion skin), filters, zoom, and
// under `farm serve` the Approve / Reject / Undo buttons. No network besides `farm serve`'s own
// /api/ endpoints; nothing read from the page is ever inserted as markup (textContent only).
(function () {
  "use strict";

  var VIEWS = ["side", "swap", "slider", "onion"];

  function all(selector, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(selector));
  }

  var sections = all("section.trace");

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
    var shown = 0;
    sections.forEach(function (s) {
      var status = s.getAttribute("data-status");
      var ok = wanted[status] !== false && (!model || s.getAttribute("data-model") === model);
      s.hidden = !ok;
      if (ok) {
        shown += 1;
      }
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

  function decide(section, action, button) {
    var result = section.querySelector(".action-result");
    var envOnly = section.querySelector("input.env-only");
    button.disabled = true;
    result.textContent = action === "approve" ? "approving..." : "rejecting...";
    post("api/" + action, { key: section.getAttribute("data-key"), env: Boolean(envOnly && envOnly.checked) })
      .then(function (data) {
        result.textContent = data.message || (data.ok ? "done" : "failed");
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
      result.textContent = (data.message || "") + (data.ok ? " (reload to see the statuses)" : "");
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
  all("#status-filter input[type=checkbox]").forEach(function (box) {
    box.addEventListener("change", applyFilters);
  });
  var modelFilter = document.getElementById("model-filter");
  if (modelFilter) {
    modelFilter.addEventListener("change", applyFilters);
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
  document.body.setAttribute("data-ready", "1");
}());
