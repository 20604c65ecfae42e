/* A list cell cut short by its column's width (or after its second line) names its whole value on hover (title), unless
   something inside it already does. Checked again when the window changes size. */
(function () {
  "use strict";
  // Cut across (an ellipsis) or below (a text that wraps, then is cut after its last line).
  function isCut(cell) {
    if (cell.scrollWidth > cell.clientWidth) {
      return true;
    }
    return Array.prototype.some.call(cell.querySelectorAll("*"), function (inner) {
      return inner.scrollHeight > inner.clientHeight + 1;
    });
  }
  function nameCutCells() {
    document.querySelectorAll("#result_list tbody td, #result_list tbody th").forEach(function (cell) {
      if (cell.dataset.cutTitle === undefined && cell.querySelector("[title]")) {
        return;
      }
      if (isCut(cell)) {
        cell.title = cell.textContent.trim();
        cell.dataset.cutTitle = "";
      } else if (cell.dataset.cutTitle !== undefined) {
        cell.removeAttribute("title");
        delete cell.dataset.cutTitle;
      }
    });
  }
  document.addEventListener("DOMContentLoaded", nameCutCells);
  window.addEventListener("resize", nameCutCells);
})();
