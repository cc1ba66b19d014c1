#!/usr/bin/env python3
"""Writes tests/data/rrule/rfc5545.json: every RRULE example of RFC 5545
§3.8.5.3 ("Recurrence Rule", pages 124-134), with the instances the RFC
lists, for tests/tests/rrule_conformance.rs.

    python3 scripts/conformance/rfc5545_examples.py > tests/data/rrule/rfc5545.json

The transcription below is by hand from the RFC's text: each example's
DTSTART, its RRULE(s) (an "or" gives two), any EXDATE, and the RFC's
"==>" listing as (year, time, zone label, month, days) groups. Ranges the
RFC writes with "-" or "..." are Python ranges here; where the RFC's listing
ends in "..." (a rule without end) `complete` is false and the listing is a
prefix of the series. EDT is -04:00, EST -05:00, as the RFC labels each
group, so an expected instant is the RFC's own and needs no time-zone
database. The RFC's listing text is kept beside each, verbatim, for review.

Source: RFC 5545 (September 2009), IETF; © IETF Trust and the persons
identified as the document authors, reproduced as excerpts with attribution
under the IETF Trust's Legal Provisions.
"""

import json
import sys

OFF = {"EDT": "-04:00", "EST": "-05:00"}
MONTHS = {m: i + 1 for i, m in enumerate(
    "January February March April May June July August September October November December".split())}


def r(a, b, step=1):
    return list(range(a, b + 1, step))


def group(year, zone, month, days, times=("09:00",)):
    return [f"{year}-{MONTHS[month]:02}-{d:02}T{t}:00{OFF[zone]}" for d in days for t in times]


# (title, DTSTART, [RRULE…], [EXDATE…], complete, [groups], RFC listing)
EX = [
    ("Daily for 10 occurrences", "19970902T090000", ["FREQ=DAILY;COUNT=10"], [], True,
     [(1997, "EDT", "September", r(2, 11))],
     "(1997 9:00 AM EDT) September 2-11"),
    ("Daily until December 24, 1997", "19970902T090000", ["FREQ=DAILY;UNTIL=19971224T000000Z"], [], True,
     [(1997, "EDT", "September", r(2, 30)), (1997, "EDT", "October", r(1, 25)),
      (1997, "EST", "October", r(26, 31)), (1997, "EST", "November", r(1, 30)), (1997, "EST", "December", r(1, 23))],
     "(1997 9:00 AM EDT) September 2-30;October 1-25 (1997 9:00 AM EST) October 26-31;November 1-30;December 1-23"),
    ("Every other day - forever", "19970902T090000", ["FREQ=DAILY;INTERVAL=2"], [], False,
     [(1997, "EDT", "September", r(2, 30, 2)), (1997, "EDT", "October", r(2, 24, 2)),
      (1997, "EST", "October", [26, 28, 30]), (1997, "EST", "November", r(1, 29, 2)), (1997, "EST", "December", [1, 3])],
     "(1997 9:00 AM EDT) September 2,4,6,8...24,26,28,30; October 2,4,6...20,22,24 (1997 9:00 AM EST) October 26,28,30; November 1,3,5,7...25,27,29; December 1,3,..."),
    ("Every 10 days, 5 occurrences", "19970902T090000", ["FREQ=DAILY;INTERVAL=10;COUNT=5"], [], True,
     [(1997, "EDT", "September", [2, 12, 22]), (1997, "EDT", "October", [2, 12])],
     "(1997 9:00 AM EDT) September 2,12,22; October 2,12"),
    ("Every day in January, for 3 years", "19980101T090000",
     ["FREQ=YEARLY;UNTIL=20000131T140000Z;BYMONTH=1;BYDAY=SU,MO,TU,WE,TH,FR,SA",
      "FREQ=DAILY;UNTIL=20000131T140000Z;BYMONTH=1"], [], True,
     [(1998, "EST", "January", r(1, 31)), (1999, "EST", "January", r(1, 31)), (2000, "EST", "January", r(1, 31))],
     "(1998 9:00 AM EST)January 1-31 (1999 9:00 AM EST)January 1-31 (2000 9:00 AM EST)January 1-31"),
    ("Weekly for 10 occurrences", "19970902T090000", ["FREQ=WEEKLY;COUNT=10"], [], True,
     [(1997, "EDT", "September", [2, 9, 16, 23, 30]), (1997, "EDT", "October", [7, 14, 21]),
      (1997, "EST", "October", [28]), (1997, "EST", "November", [4])],
     "(1997 9:00 AM EDT) September 2,9,16,23,30;October 7,14,21 (1997 9:00 AM EST) October 28;November 4"),
    ("Weekly until December 24, 1997", "19970902T090000", ["FREQ=WEEKLY;UNTIL=19971224T000000Z"], [], True,
     [(1997, "EDT", "September", [2, 9, 16, 23, 30]), (1997, "EDT", "October", [7, 14, 21]),
      (1997, "EST", "October", [28]), (1997, "EST", "November", [4, 11, 18, 25]), (1997, "EST", "December", [2, 9, 16, 23])],
     "(1997 9:00 AM EDT) September 2,9,16,23,30; October 7,14,21 (1997 9:00 AM EST) October 28; November 4,11,18,25; December 2,9,16,23"),
    ("Every other week - forever", "19970902T090000", ["FREQ=WEEKLY;INTERVAL=2;WKST=SU"], [], False,
     [(1997, "EDT", "September", [2, 16, 30]), (1997, "EDT", "October", [14]), (1997, "EST", "October", [28]),
      (1997, "EST", "November", [11, 25]), (1997, "EST", "December", [9, 23]),
      (1998, "EST", "January", [6, 20]), (1998, "EST", "February", [3, 17])],
     "(1997 9:00 AM EDT) September 2,16,30; October 14 (1997 9:00 AM EST) October 28; November 11,25; December 9,23 (1998 9:00 AM EST) January 6,20; February 3, 17 ..."),
    ("Weekly on Tuesday and Thursday for five weeks", "19970902T090000",
     ["FREQ=WEEKLY;UNTIL=19971007T000000Z;WKST=SU;BYDAY=TU,TH", "FREQ=WEEKLY;COUNT=10;WKST=SU;BYDAY=TU,TH"], [], True,
     [(1997, "EDT", "September", [2, 4, 9, 11, 16, 18, 23, 25, 30]), (1997, "EDT", "October", [2])],
     "(1997 9:00 AM EDT) September 2,4,9,11,16,18,23,25,30; October 2"),
    ("Every other week on Monday, Wednesday, and Friday until December 24, 1997, starting on Monday, September 1, 1997",
     "19970901T090000", ["FREQ=WEEKLY;INTERVAL=2;UNTIL=19971224T000000Z;WKST=SU;BYDAY=MO,WE,FR"], [], True,
     [(1997, "EDT", "September", [1, 3, 5, 15, 17, 19, 29]), (1997, "EDT", "October", [1, 3, 13, 15, 17]),
      (1997, "EST", "October", [27, 29, 31]), (1997, "EST", "November", [10, 12, 14, 24, 26, 28]),
      (1997, "EST", "December", [8, 10, 12, 22])],
     "(1997 9:00 AM EDT) September 1,3,5,15,17,19,29; October 1,3,13,15,17 (1997 9:00 AM EST) October 27,29,31; November 10,12,14,24,26,28; December 8,10,12,22"),
    ("Every other week on Tuesday and Thursday, for 8 occurrences", "19970902T090000",
     ["FREQ=WEEKLY;INTERVAL=2;COUNT=8;WKST=SU;BYDAY=TU,TH"], [], True,
     [(1997, "EDT", "September", [2, 4, 16, 18, 30]), (1997, "EDT", "October", [2, 14, 16])],
     "(1997 9:00 AM EDT) September 2,4,16,18,30; October 2,14,16"),
    ("Monthly on the first Friday for 10 occurrences", "19970905T090000", ["FREQ=MONTHLY;COUNT=10;BYDAY=1FR"], [], True,
     [(1997, "EDT", "September", [5]), (1997, "EDT", "October", [3]), (1997, "EST", "November", [7]),
      (1997, "EST", "December", [5]), (1998, "EST", "January", [2]), (1998, "EST", "February", [6]),
      (1998, "EST", "March", [6]), (1998, "EST", "April", [3]), (1998, "EDT", "May", [1]), (1998, "EDT", "June", [5])],
     "(1997 9:00 AM EDT) September 5;October 3 (1997 9:00 AM EST) November 7;December 5 (1998 9:00 AM EST) January 2;February 6;March 6;April 3 (1998 9:00 AM EDT) May 1;June 5"),
    ("Monthly on the first Friday until December 24, 1997", "19970905T090000",
     ["FREQ=MONTHLY;UNTIL=19971224T000000Z;BYDAY=1FR"], [], True,
     [(1997, "EDT", "September", [5]), (1997, "EDT", "October", [3]), (1997, "EST", "November", [7]),
      (1997, "EST", "December", [5])],
     "(1997 9:00 AM EDT) September 5; October 3 (1997 9:00 AM EST) November 7; December 5"),
    ("Every other month on the first and last Sunday of the month for 10 occurrences", "19970907T090000",
     ["FREQ=MONTHLY;INTERVAL=2;COUNT=10;BYDAY=1SU,-1SU"], [], True,
     [(1997, "EDT", "September", [7, 28]), (1997, "EST", "November", [2, 30]), (1998, "EST", "January", [4, 25]),
      (1998, "EST", "March", [1, 29]), (1998, "EDT", "May", [3, 31])],
     "(1997 9:00 AM EDT) September 7,28 (1997 9:00 AM EST) November 2,30 (1998 9:00 AM EST) January 4,25;March 1,29 (1998 9:00 AM EDT) May 3,31"),
    ("Monthly on the second-to-last Monday of the month for 6 months", "19970922T090000",
     ["FREQ=MONTHLY;COUNT=6;BYDAY=-2MO"], [], True,
     [(1997, "EDT", "September", [22]), (1997, "EDT", "October", [20]), (1997, "EST", "November", [17]),
      (1997, "EST", "December", [22]), (1998, "EST", "January", [19]), (1998, "EST", "February", [16])],
     "(1997 9:00 AM EDT) September 22;October 20 (1997 9:00 AM EST) November 17;December 22 (1998 9:00 AM EST) January 19;February 16"),
    ("Monthly on the third-to-the-last day of the month, forever", "19970928T090000", ["FREQ=MONTHLY;BYMONTHDAY=-3"], [], False,
     [(1997, "EDT", "September", [28]), (1997, "EST", "October", [29]), (1997, "EST", "November", [28]),
      (1997, "EST", "December", [29]), (1998, "EST", "January", [29]), (1998, "EST", "February", [26])],
     "(1997 9:00 AM EDT) September 28 (1997 9:00 AM EST) October 29;November 28;December 29 (1998 9:00 AM EST) January 29;February 26 ..."),
    ("Monthly on the 2nd and 15th of the month for 10 occurrences", "19970902T090000",
     ["FREQ=MONTHLY;COUNT=10;BYMONTHDAY=2,15"], [], True,
     [(1997, "EDT", "September", [2, 15]), (1997, "EDT", "October", [2, 15]), (1997, "EST", "November", [2, 15]),
      (1997, "EST", "December", [2, 15]), (1998, "EST", "January", [2, 15])],
     "(1997 9:00 AM EDT) September 2,15;October 2,15 (1997 9:00 AM EST) November 2,15;December 2,15 (1998 9:00 AM EST) January 2,15"),
    ("Monthly on the first and last day of the month for 10 occurrences", "19970930T090000",
     ["FREQ=MONTHLY;COUNT=10;BYMONTHDAY=1,-1"], [], True,
     [(1997, "EDT", "September", [30]), (1997, "EDT", "October", [1]), (1997, "EST", "October", [31]),
      (1997, "EST", "November", [1, 30]), (1997, "EST", "December", [1, 31]), (1998, "EST", "January", [1, 31]),
      (1998, "EST", "February", [1])],
     "(1997 9:00 AM EDT) September 30;October 1 (1997 9:00 AM EST) October 31;November 1,30;December 1,31 (1998 9:00 AM EST) January 1,31;February 1"),
    ("Every 18 months on the 10th thru 15th of the month for 10 occurrences", "19970910T090000",
     ["FREQ=MONTHLY;INTERVAL=18;COUNT=10;BYMONTHDAY=10,11,12,13,14,15"], [], True,
     [(1997, "EDT", "September", r(10, 15)), (1999, "EST", "March", r(10, 13))],
     "(1997 9:00 AM EDT) September 10,11,12,13,14,15 (1999 9:00 AM EST) March 10,11,12,13"),
    ("Every Tuesday, every other month", "19970902T090000", ["FREQ=MONTHLY;INTERVAL=2;BYDAY=TU"], [], False,
     [(1997, "EDT", "September", [2, 9, 16, 23, 30]), (1997, "EST", "November", [4, 11, 18, 25]),
      (1998, "EST", "January", [6, 13, 20, 27]), (1998, "EST", "March", [3, 10, 17, 24, 31])],
     "(1997 9:00 AM EDT) September 2,9,16,23,30 (1997 9:00 AM EST) November 4,11,18,25 (1998 9:00 AM EST) January 6,13,20,27;March 3,10,17,24,31 ..."),
    ("Yearly in June and July for 10 occurrences", "19970610T090000", ["FREQ=YEARLY;COUNT=10;BYMONTH=6,7"], [], True,
     [g for y in range(1997, 2002) for g in ((y, "EDT", "June", [10]), (y, "EDT", "July", [10]))],
     "(1997 9:00 AM EDT) June 10;July 10 … (2001 9:00 AM EDT) June 10;July 10"),
    ("Every other year on January, February, and March for 10 occurrences", "19970310T090000",
     ["FREQ=YEARLY;INTERVAL=2;COUNT=10;BYMONTH=1,2,3"], [], True,
     [(1997, "EST", "March", [10])] + [g for y in (1999, 2001, 2003) for g in
                                       ((y, "EST", "January", [10]), (y, "EST", "February", [10]), (y, "EST", "March", [10]))],
     "(1997 9:00 AM EST) March 10 (1999 9:00 AM EST) January 10;February 10;March 10 (2001 …) (2003 9:00 AM EST) January 10;February 10;March 10"),
    ("Every third year on the 1st, 100th, and 200th day for 10 occurrences", "19970101T090000",
     ["FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200"], [], True,
     [(1997, "EST", "January", [1]), (1997, "EDT", "April", [10]), (1997, "EDT", "July", [19]),
      (2000, "EST", "January", [1]), (2000, "EDT", "April", [9]), (2000, "EDT", "July", [18]),
      (2003, "EST", "January", [1]), (2003, "EDT", "April", [10]), (2003, "EDT", "July", [19]),
      (2006, "EST", "January", [1])],
     "(1997 9:00 AM EST) January 1 (1997 9:00 AM EDT) April 10;July 19 (2000 9:00 AM EST) January 1 (2000 9:00 AM EDT) April 9;July 18 (2003 9:00 AM EST) January 1 (2003 9:00 AM EDT) April 10;July 19 (2006 9:00 AM EST) January 1"),
    ("Every 20th Monday of the year, forever", "19970519T090000", ["FREQ=YEARLY;BYDAY=20MO"], [], False,
     [(1997, "EDT", "May", [19]), (1998, "EDT", "May", [18]), (1999, "EDT", "May", [17])],
     "(1997 9:00 AM EDT) May 19 (1998 9:00 AM EDT) May 18 (1999 9:00 AM EDT) May 17 ..."),
    ("Monday of week number 20 (where the default start of the week is Monday), forever", "19970512T090000",
     ["FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO"], [], False,
     [(1997, "EDT", "May", [12]), (1998, "EDT", "May", [11]), (1999, "EDT", "May", [17])],
     "(1997 9:00 AM EDT) May 12 (1998 9:00 AM EDT) May 11 (1999 9:00 AM EDT) May 17 ..."),
    ("Every Thursday in March, forever", "19970313T090000", ["FREQ=YEARLY;BYMONTH=3;BYDAY=TH"], [], False,
     [(1997, "EST", "March", [13, 20, 27]), (1998, "EST", "March", [5, 12, 19, 26]), (1999, "EST", "March", [4, 11, 18, 25])],
     "(1997 9:00 AM EST) March 13,20,27 (1998 9:00 AM EST) March 5,12,19,26 (1999 9:00 AM EST) March 4,11,18,25 ..."),
    ("Every Thursday, but only during June, July, and August, forever", "19970605T090000",
     ["FREQ=YEARLY;BYDAY=TH;BYMONTH=6,7,8"], [], False,
     [(1997, "EDT", "June", [5, 12, 19, 26]), (1997, "EDT", "July", [3, 10, 17, 24, 31]), (1997, "EDT", "August", [7, 14, 21, 28]),
      (1998, "EDT", "June", [4, 11, 18, 25]), (1998, "EDT", "July", [2, 9, 16, 23, 30]), (1998, "EDT", "August", [6, 13, 20, 27]),
      (1999, "EDT", "June", [3, 10, 17, 24]), (1999, "EDT", "July", [1, 8, 15, 22, 29]), (1999, "EDT", "August", [5, 12, 19, 26])],
     "(1997 9:00 AM EDT) June 5,12,19,26;July 3,10,17,24,31; August 7,14,21,28 (1998 …) (1999 9:00 AM EDT) June 3,10,17,24;July 1,8,15,22,29; August 5,12,19,26 ..."),
    ("Every Friday the 13th, forever", "19970902T090000", ["FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13"], ["19970902T090000"], False,
     [(1998, "EST", "February", [13]), (1998, "EST", "March", [13]), (1998, "EST", "November", [13]),
      (1999, "EDT", "August", [13]), (2000, "EDT", "October", [13])],
     "(1998 9:00 AM EST) February 13;March 13;November 13 (1999 9:00 AM EDT) August 13 (2000 9:00 AM EDT) October 13 ..."),
    ("The first Saturday that follows the first Sunday of the month, forever", "19970913T090000",
     ["FREQ=MONTHLY;BYDAY=SA;BYMONTHDAY=7,8,9,10,11,12,13"], [], False,
     [(1997, "EDT", "September", [13]), (1997, "EDT", "October", [11]), (1997, "EST", "November", [8]),
      (1997, "EST", "December", [13]), (1998, "EST", "January", [10]), (1998, "EST", "February", [7]),
      (1998, "EST", "March", [7]), (1998, "EDT", "April", [11]), (1998, "EDT", "May", [9]), (1998, "EDT", "June", [13])],
     "(1997 9:00 AM EDT) September 13;October 11 (1997 9:00 AM EST) November 8;December 13 (1998 9:00 AM EST) January 10;February 7;March 7 (1998 9:00 AM EDT) April 11;May 9;June 13... ..."),
    ("Every 4 years, the first Tuesday after a Monday in November, forever (U.S. Presidential Election day)",
     "19961105T090000", ["FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8"], [], False,
     [(1996, "EST", "November", [5]), (2000, "EST", "November", [7]), (2004, "EST", "November", [2])],
     "(1996 9:00 AM EST) November 5 (2000 9:00 AM EST) November 7 (2004 9:00 AM EST) November 2 ..."),
    ("The third instance into the month of one of Tuesday, Wednesday, or Thursday, for the next 3 months",
     "19970904T090000", ["FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3"], [], True,
     [(1997, "EDT", "September", [4]), (1997, "EDT", "October", [7]), (1997, "EST", "November", [6])],
     "(1997 9:00 AM EDT) September 4;October 7 (1997 9:00 AM EST) November 6"),
    ("The second-to-last weekday of the month", "19970929T090000", ["FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2"], [], False,
     [(1997, "EDT", "September", [29]), (1997, "EST", "October", [30]), (1997, "EST", "November", [27]),
      (1997, "EST", "December", [30]), (1998, "EST", "January", [29]), (1998, "EST", "February", [26]),
      (1998, "EST", "March", [30])],
     "(1997 9:00 AM EDT) September 29 (1997 9:00 AM EST) October 30;November 27;December 30 (1998 9:00 AM EST) January 29;February 26;March 30 ..."),
    ("Every 3 hours from 9:00 AM to 5:00 PM on a specific day", "19970902T090000",
     ["FREQ=HOURLY;INTERVAL=3;UNTIL=19970902T170000Z"], [], True,
     [(1997, "EDT", "September", [2], ("09:00", "12:00", "15:00"))],
     "(September 2, 1997 EDT) 09:00,12:00,15:00"),
    ("Every 15 minutes for 6 occurrences", "19970902T090000", ["FREQ=MINUTELY;INTERVAL=15;COUNT=6"], [], True,
     [(1997, "EDT", "September", [2], ("09:00", "09:15", "09:30", "09:45", "10:00", "10:15"))],
     "(September 2, 1997 EDT) 09:00,09:15,09:30,09:45,10:00,10:15"),
    ("Every hour and a half for 4 occurrences", "19970902T090000", ["FREQ=MINUTELY;INTERVAL=90;COUNT=4"], [], True,
     [(1997, "EDT", "September", [2], ("09:00", "10:30", "12:00", "13:30"))],
     "(September 2, 1997 EDT) 09:00,10:30;12:00;13:30"),
    ("Every 20 minutes from 9:00 AM to 4:40 PM every day", "19970902T090000",
     ["FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16;BYMINUTE=0,20,40", "FREQ=MINUTELY;INTERVAL=20;BYHOUR=9,10,11,12,13,14,15,16"],
     [], False,
     [(1997, "EDT", "September", [d], tuple(f"{h:02}:{m:02}" for h in r(9, 16) for m in (0, 20, 40))) for d in (2, 3)],
     "(September 2, 1997 EDT) 9:00,9:20,9:40,10:00,10:20, ... 16:00,16:20,16:40 (September 3, 1997 EDT) 9:00,9:20,9:40,10:00,10:20, ...16:00,16:20,16:40 ..."),
    ("An example where the days generated makes a difference because of WKST", "19970805T090000",
     ["FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO"], [], True,
     [(1997, "EDT", "August", [5, 10, 19, 24])],
     "(1997 EDT) August 5,10,19,24"),
    ("changing only WKST from MO to SU, yields different results", "19970805T090000",
     ["FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU"], [], True,
     [(1997, "EDT", "August", [5, 17, 19, 31])],
     "(1997 EDT) August 5,17,19,31"),
    ("An example where an invalid date (i.e., February 30) is ignored", "20070115T090000",
     ["FREQ=MONTHLY;BYMONTHDAY=15,30;COUNT=5"], [], True,
     [(2007, "EST", "January", [15, 30]), (2007, "EST", "February", [15]), (2007, "EDT", "March", [15, 30])],
     "(2007 EST) January 15,30 (2007 EST) February 15 (2007 EDT) March 15,30"),
]


# Where the RFC's listing contradicts its own rules, what the rules give and why.
BY_RULE = {
    "Every 3 hours from 9:00 AM to 5:00 PM on a specific day": (
        ["1997-09-02T09:00:00-04:00", "1997-09-02T12:00:00-04:00"],
        "UNTIL=19970902T170000Z is 13:00 EDT and bounds the series inclusively (RFC 5545 §3.3.10), so 15:00 EDT "
        "(19:00Z) is past it; the listing would need UNTIL=19970902T210000Z. Known: fmeringdal/rust-rrule#35, "
        "python-recurring-ical-events#281."),
}


def local(basic):
    return f"{basic[0:4]}-{basic[4:6]}-{basic[6:8]}T{basic[9:11]}:{basic[11:13]}:{basic[13:15]}"


def main():
    examples = []
    for title, start, rules, exdates, complete, groups, listing in EX:
        expected = [t for g in groups for t in group(*g)]
        for i, rule in enumerate(rules):
            examples.append({
                "title": title + (f" (form {i + 1} of {len(rules)})" if len(rules) > 1 else ""),
                "dtstart": local(start), "zone": "America/New_York", "rrule": rule,
                "exdates": [local(e) for e in exdates], "complete": complete,
                "expected": expected, "rfc_listing": listing,
            })
            if title in BY_RULE:
                examples[-1]["expected_by_rule"], examples[-1]["listing_contradicts_rule"] = BY_RULE[title]
    json.dump({
        "source": "RFC 5545 (September 2009), section 3.8.5.3 'Recurrence Rule', the examples (pages 124-134)",
        "licence": "IETF Trust Legal Provisions: excerpts reproduced with attribution, © IETF Trust and the authors",
        "generated_by": "scripts/conformance/rfc5545_examples.py (a hand transcription)",
        "notes": "Times in the example's zone with the offset the RFC labels them with (EDT -04:00, EST -05:00). "
                 "complete=false: the RFC lists a prefix of a series without end.",
        "examples": examples,
    }, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    print(f"{len(EX)} examples, {len(examples)} rules", file=sys.stderr)


if __name__ == "__main__":
    main()
