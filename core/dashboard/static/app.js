// Progressive enhancement only: every page works without this file.
// Filter selects submit themselves when changed.
document.addEventListener("change", function (event) {
  var el = event.target;
  if (el && el.hasAttribute && el.hasAttribute("data-autosubmit") && el.form) {
    el.form.submit();
  }
});
