/* Leaseboard dashboard glue (no build step, no inline script: the page runs under a CSP).
 *
 * Live updates
 * - Polled regions carry data-poll-visible: they poll only while the tab is visible and
 *   live updates are not paused (the check is here, not in an hx-trigger filter: filters
 *   are eval'd, and the CSP allows no eval). "Pause live updates" in the header stops them.
 * - Each polled region carries data-version; the poll sends it back in
 *   X-Leaseboard-Version and the server answers 304 when nothing changed. Each response
 *   carries X-Leaseboard-Seq (database-clock ms of its read); a response older than what
 *   is on screen is dropped, so a stale answer never replaces a newer one.
 * - Regions swap with hx-swap="morph": the new HTML is merged into the page in place, row
 *   by row (rows are keyed by id), so keyboard focus, the reading position and anything
 *   typed survive every update. Only a short status line is announced ("2 more leases
 *   in jeopardy"), never the region itself.
 * - Countdowns tick locally (once a second) from the duration the server sent and the
 *   time the fragment arrived (performance.now()), so they never compare server and
 *   browser clocks; with prefers-reduced-motion or paused updates they do not tick.
 *
 * Also: times in the viewer's zone, a confirmation dialog for risky actions, picks that
 * survive polling (and are dropped, with a note, when their row leaves), `/` to search,
 * and focus on the error summary after a failed submit.
 */
(function () {
  "use strict";
  var PAUSE_KEY = "leaseboard.paused";
  var reduceMotion = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)");

  function paused() {
    try { return window.sessionStorage.getItem(PAUSE_KEY) === "1"; } catch (e) { return false; }
  }

  /* -- announcements --------------------------------------------------------------- */
  function announce(text) {
    var region = document.getElementById("announcer");
    if (!region || !text) return;
    region.textContent = "";
    window.setTimeout(function () { region.textContent = text; }, 50);
  }
  /* Elements with data-announce="{n} more leases in jeopardy" hold a number: when it
   * grows across an update, the phrase is announced with the difference. */
  function announcedCounts(root) {
    var counts = {};
    root.querySelectorAll("[data-announce]").forEach(function (el) {
      counts[el.dataset.announce] = parseInt(el.dataset.count || el.textContent, 10) || 0;
    });
    return counts;
  }

  /* -- times in the viewer's zone ---------------------------------------------------- */
  var zone = (Intl.DateTimeFormat().resolvedOptions().timeZone) || "UTC";
  var clockFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short" });
  var dateFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "2-digit", day: "2-digit" });
  var fullFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, hour12: false, timeZoneName: "long" });
  function ago(ms) {
    var s = Math.round(ms / 1000);
    if (s < 0) return "in " + span(-s);
    if (s < 5) return "just now";
    return span(s) + " ago";
  }
  function span(s) {
    if (s < 90) return s + " s";
    var m = Math.round(s / 60);
    if (m < 90) return m + " min";
    var h = Math.round(m / 60);
    if (h < 36) return h + " h";
    return Math.round(h / 24) + " d";
  }
  function localize(root) {
    var now = Date.now(), today = dateFmt.format(new Date());
    (root || document).querySelectorAll("time[data-ms]").forEach(function (el) {
      var ms = Number(el.dataset.ms), d = new Date(ms);
      var exact = fullFmt.format(d);
      var text;
      if (el.hasAttribute("data-relative")) {
        text = ago(now - ms);
      } else {
        var day = dateFmt.format(d);
        text = (day === today ? "" : day + " ") + clockFmt.format(d);
      }
      if (el.textContent !== text) el.textContent = text;
      if (el.title !== exact) el.title = exact;
    });
    document.querySelectorAll("[data-viewer-zone]").forEach(function (el) { el.textContent = zone; });
  }

  /* -- countdowns ---------------------------------------------------------------------- */
  function fmt(ms) {
    if (ms <= 0) return "0 s";
    var s = Math.ceil(ms / 1000);
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " m " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " m";
  }
  function arrived(root) {
    var now = performance.now();
    (root || document).querySelectorAll("[data-expires-in-ms]").forEach(function (el) {
      if (el.dataset.arrivedFor !== el.dataset.expiresInMs) {
        el.dataset.arrivedAt = String(now);
        el.dataset.arrivedFor = el.dataset.expiresInMs;
      }
    });
  }
  function tick() {
    if (paused() || (reduceMotion && reduceMotion.matches)) return;
    var now = performance.now();
    document.querySelectorAll("[data-expires-in-ms]").forEach(function (el) {
      var left = Number(el.dataset.expiresInMs) - (now - Number(el.dataset.arrivedAt || now));
      var text = fmt(left);
      if (el.textContent !== text) el.textContent = text;
    });
  }

  /* -- morph: merge new HTML into the page in place ---------------------------------- */
  function key(node) { return node.nodeType === 1 && node.id ? node.id : null; }
  function blank(node) { return node.nodeType === 3 && !node.nodeValue.trim(); }
  function syncAttributes(from, to) {
    var i, a;
    // Whether a section is open is the person's choice, never the poll's.
    var mine = from.tagName === "DETAILS" ? "open" : null;
    for (i = 0; i < to.attributes.length; i++) {
      a = to.attributes[i];
      if (a.name === mine) continue;
      if (from.getAttribute(a.name) !== a.value) from.setAttribute(a.name, a.value);
    }
    for (i = from.attributes.length - 1; i >= 0; i--) {
      a = from.attributes[i];
      if (a.name !== mine && !to.hasAttribute(a.name)) from.removeAttribute(a.name);
    }
  }
  function morphNode(from, to) {
    if (from.nodeType !== 1) {
      if (from.nodeValue !== to.nodeValue) from.nodeValue = to.nodeValue;
      return;
    }
    // A time already shown in the viewer's zone stays as it is while it names the same instant.
    if (from.tagName === "TIME" && from.dataset.ms && from.dataset.ms === to.getAttribute("data-ms") &&
        from.hasAttribute("data-relative") === to.hasAttribute("data-relative")) return;
    syncAttributes(from, to);
    if (from.tagName === "TEXTAREA") return; // what is typed is the person's, never the poll's
    morphChildren(from, to);
  }
  function morphChildren(from, to) {
    var wanted = {};
    Array.prototype.forEach.call(to.childNodes, function (n) { if (key(n)) wanted[key(n)] = true; });
    var byKey = {};
    Array.prototype.forEach.call(from.childNodes, function (n) { if (key(n)) byKey[key(n)] = n; });
    var cursor = from.firstChild;
    function gone(n) { return key(n) && !wanted[key(n)]; }
    Array.prototype.slice.call(to.childNodes).forEach(function (next) {
      // Rows that left go first, so the rows that stay never move (moving blurs focus).
      while (cursor && gone(cursor)) {
        var dropped = cursor;
        cursor = cursor.nextSibling;
        from.removeChild(dropped);
      }
      var match = null, k = key(next);
      if (k && byKey[k]) { match = byKey[k]; delete byKey[k]; }
      else if (!k && cursor && !key(cursor) && cursor.nodeType === next.nodeType &&
               (cursor.nodeType !== 1 || cursor.tagName === next.tagName)) { match = cursor; }
      if (!match) { from.insertBefore(next, cursor); return; }
      if (match !== cursor) {
        // Only rows that left (and blank text) in between? Remove them instead of moving.
        var n = cursor;
        while (n && n !== match && (gone(n) || blank(n))) n = n.nextSibling;
        if (n === match) {
          while (cursor !== match) { var extra = cursor; cursor = cursor.nextSibling; from.removeChild(extra); }
        } else {
          from.insertBefore(match, cursor);
        }
      }
      if (match === cursor) cursor = cursor.nextSibling;
      morphNode(match, next);
    });
    while (cursor) { var after = cursor.nextSibling; from.removeChild(cursor); cursor = after; }
  }
  function morph(target, replacement) {
    var focused = document.activeElement;
    var before = announcedCounts(target);
    morphNode(target, replacement);
    if (focused && focused !== document.body && document.activeElement !== focused) {
      if (focused.isConnected) focused.focus({ preventScroll: true });
      else if (target.isConnected) target.focus({ preventScroll: true }); // its row left
    }
    var after = announcedCounts(target), said = [];
    Object.keys(after).forEach(function (phrase) {
      var grew = after[phrase] - (before[phrase] || 0);
      if (grew > 0 && phrase in before) said.push(phrase.replace("{n}", String(grew)));
    });
    if (said.length) announce(said.join("; "));
  }
  if (window.htmx) {
    window.htmx.defineExtension("lb-morph", {
      handleSwap: function (style, target, fragment) {
        if (style !== "morph") return false;
        var replacement = fragment.firstElementChild;
        if (!replacement) return false;
        morph(target, replacement);
        return [target];
      }
    });
  }

  /* -- picks (bulk selections) that survive polling ------------------------------------ */
  var picked = {}; // form id -> Map of value -> the box's name
  var present = {}; // form id -> values on the page before a swap
  function picksOf(formId) { return picked[formId] || (picked[formId] = new Map()); }
  function boxes(formId) { return document.querySelectorAll('input.pick[form="' + formId + '"]'); }
  function showPicked(formId) {
    var set = picksOf(formId);
    boxes(formId).forEach(function (box) { box.checked = set.has(box.value); });
    var form = document.getElementById(formId);
    var count = form && form.querySelector("[data-picked-count]");
    if (count) count.textContent = set.size ? set.size + " selected" : "";
  }
  function pickForms() {
    var ids = {};
    document.querySelectorAll("input.pick[form]").forEach(function (b) { ids[b.getAttribute("form")] = true; });
    Object.keys(picked).forEach(function (id) { ids[id] = true; });
    return Object.keys(ids);
  }
  document.addEventListener("change", function (evt) {
    var box = evt.target;
    if (!box.classList || !box.classList.contains("pick")) return;
    var set = picksOf(box.getAttribute("form"));
    if (box.checked) set.set(box.value, box.name); else set.delete(box.value);
    showPicked(box.getAttribute("form"));
  });
  // "Select all N shown": <button type="button" data-pick-all="FORM-ID"> picks every box of
  // that form on the page (a second press unpicks them).
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-pick-all]");
    if (!button) return;
    var formId = button.getAttribute("data-pick-all"), set = picksOf(formId);
    var all = Array.prototype.slice.call(boxes(formId));
    var every = all.length && all.every(function (b) { return set.has(b.value); });
    all.forEach(function (b) { if (every) set.delete(b.value); else set.set(b.value, b.name); });
    showPicked(formId);
  });

  /* -- confirmation for risky actions ------------------------------------------------- */
  /* A form (or its submit button) with data-confirm submits only after the person confirms
   * in a modal <dialog> (focus starts on Cancel; Escape cancels; focus returns to the
   * button). Without JavaScript the form submits at once; the server decides anyway. */
  var confirmed = new WeakSet();
  function confirmDialog(form, submitter, text, label) {
    var dialog = document.getElementById("confirm-dialog");
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.id = "confirm-dialog";
      dialog.setAttribute("aria-labelledby", "confirm-title");
      dialog.setAttribute("aria-describedby", "confirm-text");
      dialog.innerHTML = '<h2 id="confirm-title">Please confirm</h2><p id="confirm-text"></p>' +
        '<p class="dialog-actions"><button type="button" data-cancel>Cancel</button> ' +
        '<button type="button" class="danger" data-ok>Confirm</button></p>';
      document.body.appendChild(dialog);
      dialog.querySelector("[data-cancel]").addEventListener("click", function () { dialog.close("cancel"); });
    }
    dialog.querySelector("#confirm-text").textContent = text;
    var ok = dialog.querySelector("[data-ok]");
    ok.textContent = label || "Confirm";
    ok.onclick = function () {
      dialog.close("ok");
      confirmed.add(form);
      if (form.requestSubmit) form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
      else form.submit();
    };
    dialog.onclose = function () {
      if (dialog.returnValue !== "ok" && submitter && submitter.focus) submitter.focus();
    };
    dialog.returnValue = "";
    dialog.showModal();
    dialog.querySelector("[data-cancel]").focus();
  }
  document.addEventListener("submit", function (evt) {
    var form = evt.target, submitter = evt.submitter;
    var source = submitter && submitter.dataset && submitter.dataset.confirm ? submitter : form;
    if (source.dataset && source.dataset.confirm) {
      if (confirmed.has(form)) { confirmed.delete(form); }
      else {
        evt.preventDefault();
        evt.stopImmediatePropagation();
        confirmDialog(form, submitter, source.dataset.confirm, source.dataset.confirmLabel);
        return;
      }
    }
    // A pick form sends every picked value, also those on other pages of the list.
    if (form.id && picked[form.id]) {
      boxes(form.id).forEach(function (box) { box.disabled = true; });
      form.querySelectorAll("input[data-picked-copy]").forEach(function (i) { i.remove(); });
      picked[form.id].forEach(function (name, value) {
        var input = document.createElement("input");
        input.type = "hidden"; input.name = name || "key"; input.value = value;
        input.setAttribute("data-picked-copy", "");
        form.appendChild(input);
      });
    }
  }, true);

  /* -- pause / resume ----------------------------------------------------------------------- */
  function showPaused() {
    var on = paused();
    document.documentElement.classList.toggle("updates-paused", on);
    document.querySelectorAll("[data-live-toggle]").forEach(function (button) {
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.textContent = on ? "Resume live updates" : "Pause live updates";
    });
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-live-toggle]");
    if (!button) return;
    var on = !paused();
    try { window.sessionStorage.setItem(PAUSE_KEY, on ? "1" : "0"); } catch (e) { /* private mode */ }
    showPaused();
    announce(on ? "Live updates paused" : "Live updates resumed");
    if (!on && window.htmx) {
      document.querySelectorAll("[data-poll-visible]").forEach(function (el) { window.htmx.trigger(el, "lb:resume"); });
    }
  });

  /* -- keyboard: "/" focuses search ------------------------------------------------------- */
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "/" || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var t = evt.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var search = document.querySelector("[data-search]");
    if (!search) return;
    evt.preventDefault();
    search.focus();
    if (search.select) search.select();
  });

  /* -- htmx wiring -------------------------------------------------------------------------- */
  document.addEventListener("htmx:confirm", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-poll-visible")) return;
    var poll = !evt.detail.triggeringEvent || evt.detail.triggeringEvent.type === "visibilitychange";
    if (document.visibilityState !== "visible" || (poll && paused())) {
      evt.preventDefault(); // never issued: the next tick (or becoming visible) polls again
    }
  });
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.dataset && elt.dataset.version) {
      evt.detail.headers["X-Leaseboard-Version"] = elt.dataset.version;
    }
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr.status === 304) { evt.detail.shouldSwap = false; return; }
    var seq = Number(xhr.getResponseHeader("X-Leaseboard-Seq") || 0);
    var target = evt.detail.target;
    var current = target && target.dataset ? Number(target.dataset.seq || 0) : 0;
    if (seq && current && seq < current) { evt.detail.shouldSwap = false; return; }
    pickForms().forEach(function (id) {
      present[id] = new Set(Array.prototype.map.call(boxes(id), function (b) { return b.value; }));
    });
  });
  document.addEventListener("htmx:afterSwap", function () {
    arrived(document);
    localize(document);
    pickForms().forEach(function (id) {
      var now = new Set(Array.prototype.map.call(boxes(id), function (b) { return b.value; }));
      var gone = [];
      picksOf(id).forEach(function (name, value) {
        if (present[id] && present[id].has(value) && !now.has(value)) gone.push(value);
      });
      gone.forEach(function (value) { picked[id].delete(value); });
      if (gone.length) {
        var note = "Removed from your selection (no longer live on this page): " + gone.join(", ");
        var form = document.getElementById(id);
        var where = form && form.querySelector("[data-picked-note]");
        if (where) where.textContent = note;
        announce(note);
      }
      showPicked(id);
    });
    document.querySelectorAll("form[data-upto-from]").forEach(function (form) {
      var region = document.querySelector(form.dataset.uptoFrom);
      var input = form.querySelector('input[name="upto"]');
      if (region && input && region.dataset.maxId) input.value = region.dataset.maxId;
    });
  });

  /* -- copy buttons ------------------------------------------------------------------ */
  /* A <button data-copy="..."> (hidden in the HTML: without script the value beside it is
   * selectable text) copies its value and says so. */
  function copyButtons(root) {
    root.querySelectorAll("button[data-copy]").forEach(function (b) {
      if (navigator.clipboard) b.hidden = false;
    });
  }
  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest("button[data-copy]");
    if (!b || !navigator.clipboard) return;
    navigator.clipboard.writeText(b.dataset.copy).then(function () {
      b.textContent = "Copied";
      announce("Copied " + b.dataset.copy);
      window.setTimeout(function () { b.textContent = "Copy"; }, 2000);
    });
  });
  document.addEventListener("htmx:afterSwap", function () { copyButtons(document); });

  document.addEventListener("DOMContentLoaded", function () {
    copyButtons(document);
    arrived(document);
    localize(document);
    showPaused();
    pickForms().forEach(showPicked);
    window.setInterval(tick, 1000);
    window.setInterval(function () { localize(document); }, 15000);
    // After a failed submit, the summary of what went wrong takes focus.
    var summary = document.querySelector(".error-summary, .messages [role=alert]");
    if (summary) { summary.setAttribute("tabindex", "-1"); summary.focus(); }
  });
})();
