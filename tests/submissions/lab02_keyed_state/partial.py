"""Lab 02 partly solved: part A right, part B wrong in a way that shows only from the second batch on, part C
left as the student got it.

Part B counts each batch's visits afresh, overwriting what the map state held: right after the first batch, wrong
from the first batch in which a user visits a page again. Missing ids keep the released stub (raise
NotImplementedError()), so part C's run cell fails and its tests score nothing. The feedback page shows Part B's
state beside the reference's and the batch where it diverged (DIVERGES_AT).
"""

EXPECTED_SCORE = 3
DIVERGES_AT = {"Part B, page_counts": 1}  # batch 1 is the first in which a user visits a page again

ANSWERS = {
    "dedup": '''
class RetryFilter(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.first_sent = handle.getValueState("first_sent", "at_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        if not self.first_sent.exists():
            row = sorted(rows, key=lambda r: r.ts)[0]
            self.first_sent.update((row.ts_ms,))
            self.handle.registerTimer(row.ts_ms + RESEND_MS)
            yield Row(event_id=row.event_id, user=row.user, page=row.page, ts=row.ts)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.first_sent.clear()
        return iter([])


def deduplicate(clicks):
    return clicks.groupBy("event_id").transformWithState(RetryFilter(), sl.m02.CLICK_SCHEMA, "Append", "EventTime")
''',
    "pages": '''
class PageCounts(StatefulProcessor):
    def init(self, handle):
        self.page_counts = handle.getMapState("page_counts", "page STRING", "visits LONG")

    def handleInputRows(self, key, rows, timerValues):
        pages = []
        for row in rows:  # wrong: counts the visits of this batch only, overwriting what earlier batches counted
            if row.page not in pages:
                pages.append(row.page)
                self.page_counts.updateValue((row.page,), (0,))
            before = self.page_counts.getValue((row.page,))
            self.page_counts.updateValue((row.page,), (before[0] + 1,))
        for page in pages:
            yield Row(user=key[0], page=page, visits=self.page_counts.getValue((page,))[0])


def count_pages(clicks):
    return clicks.groupBy("user").transformWithState(
        PageCounts(), "user STRING, page STRING, visits LONG", "Update", "None")
''',
}
