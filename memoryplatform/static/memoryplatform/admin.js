/* A list cell cut short by the width of its column names its whole value on hover (title), unless
   something inside it already does. Checked again when the window changes size. */
(function () {
  "use strict";
  function nameCutCells() {
    document.querySelectorAll("#result_list tbody td, #result_list tbody th").forEach(function (cell) {
      if (cell.dataset.cutTitle === undefined && cell.querySelector("[title]")) {
        return;
      }
      if (cell.scrollWidth > cell.clientWidth) {
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
