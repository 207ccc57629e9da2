/* The time zone picker: narrow the list as the editor types; offer the browser's zone first. */
"use strict";
(function () {
    function words(text) {
        return text.toLowerCase().replace(/[_/]/g, " ");
    }

    function setUp(picker) {
        const select = picker.querySelector("select");
        const oldNames = JSON.parse(document.getElementById("zone-picker-old-names").textContent);
        // An old name someone types (Calcutta) finds the zone it names today (Kolkata).
        const formerly = {};
        for (const [old, current] of Object.entries(oldNames)) {
            formerly[current] = (formerly[current] || "") + " " + old;
        }
        const find = picker.querySelector(".zone-picker-find");
        const none = picker.querySelector(".zone-picker-none");
        find.hidden = false;
        find.addEventListener("input", function () {
            const wanted = words(find.value.trim());
            let shown = 0;
            for (const group of select.querySelectorAll("optgroup")) {
                let inGroup = 0;
                for (const option of group.querySelectorAll("option")) {
                    const match = !wanted || words([group.label, option.value, option.text, formerly[option.value] || ""].join(" ")).includes(wanted);
                    option.hidden = !match;
                    inGroup += match ? 1 : 0;
                }
                group.hidden = inGroup === 0;
                shown += inGroup;
            }
            none.hidden = shown > 0;
        });

        let browserZone = "";
        try {
            browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
        } catch (error) {
            return;
        }
        browserZone = oldNames[browserZone] || browserZone;
        const offered = Array.from(select.options).find(function (option) {
            return option.value === browserZone;
        });
        if (!offered || select.value === browserZone) {
            return;
        }
        const browser = picker.querySelector(".zone-picker-browser");
        browser.querySelector("[data-browser-zone]").textContent = browserZone.replace(/_/g, " ");
        browser.hidden = false;
        browser.querySelector("[data-use-browser-zone]").addEventListener("click", function () {
            select.value = browserZone;
            offered.scrollIntoView({block: "nearest"});
            select.dispatchEvent(new Event("change", {bubbles: true}));
            browser.hidden = true;
        });
    }

    function ready() {
        document.querySelectorAll("[data-zone-picker]").forEach(setUp);
    }

    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", ready);
    } else {
        ready();
    }
})();
