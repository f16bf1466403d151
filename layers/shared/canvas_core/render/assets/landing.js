(function () {
  "use strict";
  var form = document.getElementById("signup-form");
  var email = document.getElementById("signup-email");
  var message = document.getElementById("signup-message");
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (!email.checkValidity()) { message.textContent = "Please enter a valid email address."; email.focus(); return; }
    message.textContent = "Thanks! We will be in touch at " + email.value + ".";
    form.reset();
  });
})();
