"""analyze.dimensions on hand-made tricky texts with gold labels: precision and recall of dates and countries.

Each text is one trap (BC years, decades and centuries, "1914–18", "summer of '69", numbers that are
no years, namesake places: Georgia, Paris Texas, Sydney Nova Scotia, places and dates not in English)
with the ISO dates and ISO 3166-1 countries a careful reader takes from its title and text. Prints
each text whose extraction differs from its gold, then precision and recall over the set.

    .venv/bin/python benchmarks/dimensions_tricky.py
"""

from __future__ import annotations

import argparse

import pyarrow as pa

from operators.registry import create

#: (title, text, gold dates, gold countries)
TRICKY = [
    ('Caesar', 'Julius Caesar was born in 100 BC and crossed the Rubicon in 49 BCE.',
     [], []),
    ('Grunge', 'Grunge music rose in the 1990s in Seattle.',
     ['1990/1999'], ['US']),
    ('Novel', 'The novel flourished in the 19th century in Britain.',
     ['1800/1899'], ['GB']),
    ('WWI', 'The war lasted from 1914 to 1918 and devastated Belgium.',
     ['1914/1918'], ['BE']),
    ('WWI dash', 'The First World War (1914–18) reshaped Europe.',
     ['1914/1918'], []),
    ('Pandemic', 'Lockdowns began in May 2020 across Italy.',
     ['2020-05'], ['IT']),
    ('ISO', 'The dataset was released on 2021-03-15 in Tokyo.',
     ['2021-03-15'], ['JP']),
    ('Woodstock', "It was the summer of '69 in upstate New York.",
     ['1969'], ['US']),
    ('Crowd', 'About 3000 people gathered in Mexico City.',
     [], ['MX']),
    ('Citation', 'See page 1999 of the report for details.',
     [], []),
    ('Georgia', 'Atlanta is the capital of Georgia.',
     [], ['US']),
    ('Paris Texas', 'Paris, Texas is a small city in the United States.',
     [], ['US']),
    ('Foreign names', 'He moved from München to Köln and then to Moskva.',
     [], ['DE', 'RU']),
    ('Apollo', 'Apollo 11 landed on 20 July 1969, watched from Houston.',
     ['1969-07-20'], ['US']),
    ('Decade apostrophe', "Fashion of the '80s and the 1960's returned.",
     ['1960/1969'], []),
    ('Early century', 'In the early 20th century, Vienna was a capital of music.',
     ['1900/1999'], ['AT']),
    ('BC range', 'The Roman Republic lasted from 509 BC to 27 BC.',
     [], []),
    ('Score', 'The team won 2010 to 1998 points in a charity game.',
     [], []),
    ('US date', 'The treaty was signed on November 11, 1918 at Compiègne, France.',
     ['1918-11-11'], ['FR']),
    ('Range dash', 'The Second World War (1939–1945) involved Germany and Japan.',
     ['1939/1945'], ['DE', 'JP']),
    ('Since', 'Since 1991 Ukraine has been independent.',
     ['1991'], ['UA']),
    ('Model number', 'The Intel 8086 and the Nokia 3310 were popular in Finland.',
     [], ['FI']),
    ('Phone', 'Call 1800 555 1999 for support.',
     [], []),
    ('Money', 'It cost $1500 in London in 1850.',
     ['1850'], ['GB']),
    ('Jordan person', 'Michael Jordan played in Chicago in 1991.',
     ['1991'], ['US']),
    ('Sydney Nova Scotia', 'Sydney, Nova Scotia, is in Canada.',
     [], ['CA']),
    ('Georgia country', 'Tbilisi is the capital of Georgia, a country in the Caucasus.',
     [], ['GE']),
    ('ISO month', 'Sales for 2019-07 were strong in Brazil.',
     ['2019-07'], ['BR']),
    ('Mid', 'By the mid-1800s, Ireland had lost a quarter of its people.',
     ['1800/1899'], ['IE']),
    ('Invalid date', 'The meeting on 30 February 2021 in Berlin was cancelled.',
     [], ['DE']),
    ('AD', 'The city was founded in AD 1066 near York.',
     ['1066'], ['GB']),
    ('Span words', 'Between 1950 and 1960 India grew quickly.',
     ['1950/1960'], ['IN']),
    ('Range reversed', 'Records 1990-1985 were mislabelled in Canada.',
     [], ['CA']),
    ('Two digit range', 'The 1998–99 season was the best for Spain.',
     ['1998/1999'], ['ES']),
    ('Non-English', 'Le traité fut signé à Paris le 28 juin 1919.',
     ['1919-06-28'], ['FR']),
    ('Thanksgiving', 'We ate turkey in China.',
     [], ['CN']),
    ('Temperature', 'The furnace reached 1600 degrees in 1600 hours in Sweden.',
     [], ['SE']),
    ('Year cue', 'The year 2000 problem worried Australia.',
     ['2000'], ['AU']),
    ('Early year', 'In 1450 Gutenberg printed in Mainz, Germany.',
     ['1450'], ['DE']),
    ('Future', "By 2050 Africa's population may double.",
     ['2050'], []),
    ('Around', 'Born c. 1340, Chaucer lived in England.',
     ['1340'], ['GB']),
    ('Paris France', 'The Louvre in Paris holds the Mona Lisa.',
     [], ['FR']),
    ('Crossing', 'George Washington crossed the Delaware.',
     [], []),
    ('Nagasaki date', 'On 9 August 1945 Nagasaki was bombed.',
     ['1945-08-09'], ['JP']),
    ('Dec 31', 'On Dec. 31, 1999, Boris Yeltsin resigned in Russia.',
     ['1999-12-31'], ['RU']),
    ('Bronze Age', 'Troy fell in the 1200s BC, long before Greece was a nation; Mycenae lasted until c. 1100 B.C',
     [], ['GR']),
]


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # no options: --help says so
    table = pa.table({"title": [t[0] for t in TRICKY], "text": [t[1] for t in TRICKY]})
    out = create("analyze.dimensions")(table).to_pylist()
    counts = {"dates": [0, 0, 0], "countries": [0, 0, 0]}  # right, wrong, missed
    for (title, text, dates, countries), row in zip(TRICKY, out):
        for column, gold in (("dates", set(dates)), ("countries", set(countries))):
            got = set(row[column])
            counts[column][0] += len(got & gold)
            counts[column][1] += len(got - gold)
            counts[column][2] += len(gold - got)
        if set(row["dates"]) != set(dates) or set(row["countries"]) != set(countries):
            print(f"{title}: dates {row['dates']} (gold {dates}), countries {row['countries']} (gold {countries})")
    for column, (right, wrong, missed) in counts.items():
        print(f"{column}: precision {right}/{right + wrong}, recall {right}/{right + missed}")


if __name__ == "__main__":
    main()
