// perfsuite site: filters and sortable columns for the index's table of cases. No dependency, no network.
// Without this script every row shows, unsorted: the pages are plain HTML.
(function () {
  "use strict";
  var table = document.getElementById("cases");
  if (!table) {
    return;
  }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var form = document.getElementById("filters");
  var shown = document.getElementById("shown");
  var selects = form ? Array.prototype.slice.call(form.querySelectorAll("select[data-filter]")) : [];

  // The filters live in the address's fragment (#device=cpu&mode=train), so a filtered view can be linked.
  function readFragment() {
    var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    selects.forEach(function (select) {
      var wanted = params.get(select.getAttribute("data-filter")) || "";
      var known = Array.prototype.some.call(select.options, function (option) {
        return option.value === wanted;
      });
      select.value = known ? wanted : "";
    });
  }

  function writeFragment(wanted) {
    var params = new URLSearchParams();
    wanted.forEach(function (pair) {
      if (pair[1]) {
        params.set(pair[0], pair[1]);
      }
    });
    var fragment = params.toString();
    try {
      window.history.replaceState(null, "", fragment ? "#" + fragment : window.location.pathname);
    } catch (ignored) {
      // Some browsers refuse to rewrite file:// addresses; the filters still work.
    }
  }

  function applyFilters(remember) {
    var wanted = selects.map(function (select) {
      return [select.getAttribute("data-filter"), select.value];
    });
    var visible = 0;
    rows.forEach(function (row) {
      var keep = wanted.every(function (pair) {
        return !pair[1] || row.getAttribute("data-" + pair[0]) === pair[1];
      });
      row.hidden = !keep;
      visible += keep ? 1 : 0;
    });
    if (shown) {
      shown.textContent = visible + " of " + rows.length + " cases";
    }
    if (remember) {
      writeFragment(wanted);
    }
  }

  function sortValue(cell, type) {
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (raw === "") {
      return null;
    }
    if (type === "number") {
      var number = parseFloat(raw);
      return isNaN(number) ? null : number;
    }
    return raw.toLowerCase();
  }

  function sortBy(header, column) {
    var type = header.getAttribute("data-type");
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
      other.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var keyed = rows.map(function (row, index) {
      return { value: sortValue(row.cells[column], type), index: index, row: row };
    });
    keyed.sort(function (a, b) {
      // Unknown values go last in either direction; equal values keep their order.
      if (a.value === null || b.value === null) {
        return (a.value === null) - (b.value === null) || a.index - b.index;
      }
      var order = a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
      return (ascending ? order : -order) || a.index - b.index;
    });
    rows = keyed.map(function (entry) {
      body.appendChild(entry.row);
      return entry.row;
    });
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
    var button = header.querySelector("button");
    if (button) {
      button.addEventListener("click", function () {
        sortBy(header, column);
      });
    }
  });
  selects.forEach(function (select) {
    select.addEventListener("change", function () {
      applyFilters(true);
    });
  });
  window.addEventListener("hashchange", function () {
    readFragment();
    applyFilters(false);
  });
  readFragment();
  applyFilters(false);
})();
