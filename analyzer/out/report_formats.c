/* report_formats.c: the table of the report's formats (report_formats.h): text (report_text.c)
 * and JSON (report_json.c). */
#include "out/report_formats.h"

#include "out/report.h" /* an_report_text, an_report_json */

const struct an_report_format an_report_formats[] = {
    [AN_REPORT_TEXT] = {"text", an_report_text},
    [AN_REPORT_JSON] = {"json", an_report_json},
};
