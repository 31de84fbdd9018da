// Herald console: the few things a page does in the browser. The pages work
// without it except the portal link (which carries its token in the URL
// fragment, never sent to a server: this script moves it into the sign-in
// form and submits it).
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    // Portal link: /ui/portal#token=herald_portal_…
    var form = document.getElementById("signin");
    if (form && form.dataset.portal) {
      var m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
      if (m) {
        history.replaceState(null, "", location.pathname);
        form.elements.key.value = decodeURIComponent(m[1]);
        form.submit();
      } else {
        // No token in the link (cut when copied?): say so instead of
        // "Opening your portal…" for ever.
        var h = document.querySelector(".signin h1");
        if (h) { h.textContent = "Sign in"; }
        var p = document.createElement("p");
        p.className = "error";
        p.setAttribute("data-testid", "portal-no-token");
        p.textContent = "This portal link has no token: it ends in #token=herald_portal_…. Copy the whole link you were given, or paste the link or its token below.";
        form.parentNode.insertBefore(p, form);
      }
    }
    // Select every dead letter on the page.
    var all = document.getElementById("select-all");
    if (all) {
      all.addEventListener("change", function () {
        document.querySelectorAll('#replay-selected input[name="id"]').forEach(function (c) { c.checked = all.checked; });
      });
    }
    // Forms that ask before submitting (revoke).
    document.querySelectorAll("form.confirm-submit").forEach(function (f) {
      f.addEventListener("submit", function (e) {
        if (!window.confirm(f.dataset.confirm)) { e.preventDefault(); }
      });
    });
  });
})();
