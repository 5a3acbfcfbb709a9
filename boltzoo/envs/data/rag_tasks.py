"""Multi-hop retrieval QA for rag-v0: a generated fictional world (MuSiQue / HotpotQA: ``loaders``).

The generated set (corpus ``"fictional-v0"``) is a seeded world of invented people,
organisations, works and places, so no model can know its facts and every question needs
retrieval. Names are coined from syllable lists; every coined word is unique in the world (a
first name is shared by several people but is never a place, a surname or part of a title), and
a small list of real names and the words of the prose templates are never coined.

World (seed 0; see :data:`WORLD_SIZES`): 24 countries, 96 regions, 480 cities, 1,500 people,
540 organisations (300 general ones plus a press, studio, shipyard, museum, engineering works
and theatre kind of 40 each) and 900 works (novels, films, ships, paintings, inventions,
operas; 150 each). Relations, each functional in the direction questions follow:

    person        born_in -> city, born_year -> year, spouse -> person, mentor -> person
    organisation  founder -> person, founded_year -> year, headquarters -> city, leader -> person
    work          creator -> person, year -> year, producer -> organisation (publisher, studio,
                  shipyard, museum, manufacturer or theatre, by the work's kind)
    city          region -> region, country -> country (one sentence states both)
    region        country -> country, seat -> city
    country       capital -> city

Passages (title = the entity's name, 1-4 sentences): every fact of a real entity is stated in
exactly one *fact* passage, 1-3 facts per passage, each relation with 3-5 sentence templates;
*mention* passages tell other things about a real entity (who it corresponded with, where it
had a branch office, who praised it) without stating any question relation; *decoy* passages
are about invented look-alikes (``Quillmere Trust`` -> ``Quillmore Trust``) with similar facts.
Decoy titles never equal a real entity's name, and a decoy's facts never say anything about a
real entity's own relations (no decoy is anyone's spouse). Passage ids are opaque
(``fv0-00042``, in shuffled order), so an id does not tell a decoy from a real passage.
Seed 0 gives 8,046 passages (6,466 fact, 780 mention, 800 decoy) about 3,540 real and 800
decoy entities, in about 0.4 s.

Questions: 18 two-hop and 14 three-hop templates (``_QUESTION_TEMPLATES``) compose relations
from a named first entity, e.g. "In which country was the person who set up the Quillmere
Trust born?" (organisation -> founder -> birthplace -> country). Questions paraphrase the
relations (the prose says "was established by", the question "who set up"), name only the
first-hop entity and never an intermediate one or the answer. Answers are entity names or years.
Each template takes up to 50 (two-hop) or 64 (three-hop) distinct first entities (seed 0:
1,796 questions, 1,528 train and 268 test, about half of each three-hop); a question is in
``test`` when sha256(question) % 100 < 15, so the split depends on the text alone.

Aliases: a person whose passages give an honorific ("Dr.", "Professor", "Captain") has the
honorific form as an alias (answer ``Ilse Varnhoff``, alias ``Dr. Ilse Varnhoff``); their own
passages always introduce them with it. No other aliases: surnames alone could be ambiguous,
and years, places, organisations and works have one written form (scorers strip articles).

The loaders (``loaders.py``) read MuSiQue jsonl and HotpotQA json (or jsonl) files verbatim,
each question with its own paragraphs as its corpus, or all paragraphs of the file as one shared
corpus.
"""

from __future__ import annotations

import bisect
import functools
import random
import re
from dataclasses import dataclass, field

from boltzoo.envs.data.files import (
    bundled_table,
    check_choice,
    hash_split,
    short_digest,
)

__all__ = [
    "CORPUS_ID",
    "SPLITS",
    "WORLD_SIZES",
    "Passage",
    "RAGDataset",
    "RAGTask",
    "generate_dataset",
]

CORPUS_ID = "fictional-v0"
SPLITS = ("train", "test")
# sha256(question) % 100 below this puts a question in test (about 15%).
TEST_PERCENT = 15

WORLD_SIZES = {
    "countries": 24,
    "regions_per_country": 4,
    "cities_per_region": 5,
    "people": 1500,
    "general_organisations": 300,
    "organisations_per_work_kind": 40,
    "works_per_kind": 150,
    "decoy_people": 300,
    "decoy_organisations": 170,
    "decoy_works": 240,
    "decoy_cities": 90,
    "mention_people": 330,
    "mention_organisations": 170,
    "mention_works": 160,
    "mention_cities": 120,
}
# Distinct first entities taken per question template, by hop count.
_QUESTIONS_PER_TEMPLATE = {2: 50, 3: 64}


@dataclass(frozen=True)
class Passage:
    """One retrievable passage.

    Attributes:
        passage_id: Unique within its corpus (``"fv0-00042"``, ``"{task_id}-{idx}"``, ...).
        title: The entity (or file paragraph) title.
        text: The passage body, verbatim for file corpora; it does not repeat the title.
    """

    passage_id: str
    title: str
    text: str


@dataclass(frozen=True)
class RAGTask:
    """One multi-hop question.

    Attributes:
        task_id: ``"fv0-{10 hex of sha256(question)}"`` for generated tasks, the row id for files.
        question: The question shown to the agents.
        answer: Gold answer (an entity name or a year for generated tasks).
        aliases: Other accepted answers (honorific forms of person names; a file's aliases).
        supporting_ids: Passage ids needed to answer, first hop first.
        hops: 2 or 3 for generated tasks; the number of supporting passages for file rows.
        corpus_id: Key of the task's corpus in :attr:`RAGDataset.corpora`.
        template: Question template name for generated tasks, None for file rows.
    """

    task_id: str
    question: str
    answer: str
    aliases: tuple[str, ...]
    supporting_ids: tuple[str, ...]
    hops: int
    corpus_id: str
    template: str | None


@dataclass(frozen=True)
class RAGDataset:
    """Tasks and the corpora their passages live in (``corpus_id -> passages``)."""

    tasks: list[RAGTask]
    corpora: dict[str, list[Passage]]


# ---------------------------------------------------------------------------------------------
# Prose templates
# ---------------------------------------------------------------------------------------------
# Placeholders: {S} subject at a sentence start (name or pronoun), {s} subject inside a sentence
# (always the name), {P} possessive at a sentence start, {pr} subject pronoun, {p} possessive
# pronoun, {O} the object entity, {Y} a year, {occ} occupation, {noun} husband/wife (of {O}),
# {desc} a kind description ({a_occ}/{a_desc}: with "a"/"an"), {R} region, {C} country,
# {thing}/{n} flavour words.

_TABLES = bundled_table("rag_world.json")
_FACTS: dict[str, tuple[str, ...]] = _TABLES["facts"]

_INTROS: dict[str, tuple[str, ...]] = _TABLES["intros"]

_FLAVOURS: dict[str, tuple[str, ...]] = _TABLES["flavours"]

# Sentences about a real entity that state no question relation ({E} another person, {G} an
# organisation, {W} a work, {T} a city, {Y} a year).
_MENTIONS: dict[str, tuple[str, ...]] = _TABLES["mentions"]

# ---------------------------------------------------------------------------------------------
# Question templates
# ---------------------------------------------------------------------------------------------

# (name, kind of the first entity, relations followed from it)
_QUESTION_TEMPLATES: tuple[tuple[str, str, tuple[str, ...]], ...] = _TABLES["question_templates"]

# Noun phrases for "the <relation> of x" ({x} the entity the relation starts from).
_NOUN_PHRASES: dict[str, tuple[str, ...]] = _TABLES["noun_phrases"]
# Two relations folded into one noun phrase.
_FOLDED_NOUN_PHRASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("born_in", "country"): ("the country where {x} was born", "the native country of {x}"),
    ("born_in", "region"): ("the region where {x} was born", "the home region of {x}"),
    ("headquarters", "country"): ("the country in which {x} is based",),
}
# Questions asking for the last relation of x.
_ASKS: dict[str, tuple[str, ...]] = _TABLES["asks"]
_FOLDED_ASKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("born_in", "country"): (
        "In which country was {x} born?",
        "What is the country of birth of {x}?",
        "Which country does {x} come from by birth?",
    ),
    ("born_in", "region"): ("In which region was {x} born?", "What region is {x} from by birth?"),
    ("headquarters", "country"): (
        "In which country is {x} headquartered?",
        "Which country is {x} based in?",
    ),
    ("headquarters", "region"): (
        "In which region is {x} headquartered?",
        "Which region is {x} based in?",
    ),
}

# ---------------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------------

_ONSETS = (
    "b", "br", "d", "dr", "f", "fl", "g", "gr", "h", "k", "kl", "l", "m", "n", "p", "pr",
    "qu", "r", "s", "sk", "st", "t", "tr", "th", "v", "w", "z", "c", "cr", "sh", "j",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
_JOINS = ("n", "r", "l", "s", "m", "v", "d", "th", "nd", "rn", "ll", "t", "k")
_ENDINGS = _TABLES["endings"]
# Real places, famous people and common English words a coined word must never be.
_REAL_NAMES = frozenset(
    """paris london berlin rome vienna prague moscow madrid lisbon athens cairo delhi tokyo
    boston dublin oslo bergen malta java cuba peru chad mali togo kenya india china japan korea
    russia austria albania bolivia georgia jordan sudan syria libya sparta troy carthage
    tesla edison newton darwin curie marx bach mozart verdi dante plato homer nero cicero
    caesar lenin stalin hitler gandhi luther calvin kant hegel tolstoy monet manet degas goya
    dali turing nobel ford disney einstein galileo kepler bohr planck euler gauss hume locke
    byron keats shelley dickens austen bronte orwell kafka proust joyce verne wagner chopin
    liszt haydn handel ravel dvorak napoleon cleopatra moses jesus buddha allah venus mars
    jupiter saturn apollo athena zeus odin thor loki vesta juno diana
    none done gone bone tone zone line mine nine fine wine pine dine vine shine stone trade
    grace drama sofa tuna data area idea arena villa mania media tester master sister better
    letter water later mover never fever lover power tower flower gather father mother
    brother other dinner winter summer banner manner dealer seller teller holder border order
    murder wonder under thunder sender render tender gender lender ponder river silver carver
    server cover rover clover driver liner miner diner finer tuner toner owner corner partner
    lantern garden harbor harbour castle hammer ladder rudder matter butter cutter lodge
    ridge bridge manor tenor minor major honor valor vapor motor rotor sonar lunar polar
    solar molar cedar radar nectar hector victor doctor sailor tailor mirror terror error
    pastor castor senior junior sever lever clever hover shiver quiver liver giver""".split()
)
# (occupation, honorific, weight); the six creative ones create the six kinds of work.
_OCCUPATIONS = _TABLES["occupations"]
_WORK_KINDS = ("novel", "film", "ship", "painting", "invention", "opera")
_CREATOR_OF = {
    "novel": "novelist", "film": "film director", "ship": "naval architect",
    "painting": "painter", "invention": "inventor", "opera": "composer",
}  # fmt: skip
# Organisation kind that produces each kind of work.
_PRODUCER_KIND = {
    "novel": "Press", "film": "Studios", "ship": "Shipyard",
    "painting": "Museum", "invention": "Works", "opera": "Theatre",
}  # fmt: skip
# Organisation kind -> (description, short noun for "the <noun>").
_ORG_KINDS = _TABLES["org_kinds"]
_GENERAL_ORG_KINDS = tuple(kind for kind in _ORG_KINDS if kind not in _PRODUCER_KIND.values())
_WORK_DESCRIPTIONS = _TABLES["work_descriptions"]
_WORK_NOUN = {
    "novel": "novel", "film": "film", "ship": "ship", "painting": "painting",
    "invention": "device", "opera": "opera",
}  # fmt: skip
_WORK_TITLES = _TABLES["work_titles"]
_TITLE_NOUNS = (
    "Lantern", "Orchard", "Mirror", "Harvest", "Ledger", "Garden", "Tide", "Bell", "Archive",
    "Feather", "Compass", "Bridge", "Letter", "Oath", "Crown", "Shadow", "Season", "Window",
)  # fmt: skip
_DEVICES = (
    "Loom", "Lamp", "Engine", "Valve", "Telegraph", "Pump", "Lens", "Clock",
    "Furnace", "Sextant", "Winch", "Barometer", "Dynamo",
)  # fmt: skip
_CITY_KINDS = (
    "market town", "river port", "hill town", "mining town", "coastal town", "cathedral city",
    "mill town", "fishing town",
)  # fmt: skip
_THINGS = (
    "wool markets", "salt marshes", "clock towers", "apple orchards", "stone bridges",
    "glassworks", "spring fair", "old harbour", "pine forests", "copper mines",
)  # fmt: skip


def _template_words() -> frozenset[str]:
    texts: list[str] = []
    for table in (_FACTS, _INTROS, _FLAVOURS, _MENTIONS, _NOUN_PHRASES, _ASKS):
        for patterns in table.values():
            texts.extend(patterns)
    for table in (_FOLDED_NOUN_PHRASES, _FOLDED_ASKS):
        for patterns in table.values():
            texts.extend(patterns)
    for patterns in _WORK_TITLES.values():
        texts.extend(patterns)
    texts.extend(_TITLE_NOUNS + _DEVICES + _CITY_KINDS + _THINGS + tuple(_ORG_KINDS))
    texts.extend(occupation for occupation, _, _ in _OCCUPATIONS)
    return frozenset(word.lower() for text in texts for word in re.findall(r"[A-Za-z]+", text))


_RESERVED = _REAL_NAMES | _template_words()
_PAIRS = ("ai", "ei", "ou", "au")
_BAD_SPELLING_RE = re.compile(r"(.)\1\1|([aeiouy])\2|[aeiouy]{3}|[^aeiouy]{4}|^[^aeiouy]{3}")


class _Coiner:
    """Coin pronounceable words, each at most once per world."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set(_RESERVED)

    def claim(self, word: str, shortest: int = 5) -> bool:
        key = word.lower()
        if key in self.used or _BAD_SPELLING_RE.search(key) or not shortest <= len(key) <= 12:
            return False
        self.used.add(key)
        return True

    def coin(self, style: str, syllables: tuple[int, ...] = (1, 2, 2)) -> str:
        rng = self.rng
        for _ in range(10_000):
            word = ""
            for index in range(rng.choice(syllables)):
                if index == 0:
                    word += rng.choice(_ONSETS) if rng.random() < 0.85 else ""
                else:
                    word += rng.choice(_JOINS)
                word += rng.choice(_VOWELS)
            ending = rng.choice(_ENDINGS[style])
            if ending[0] in "aeiouy":
                word = word.rstrip("aeiouy")
            word = (word + ending).capitalize()
            if self.claim(word, shortest=4 if style.startswith("first") else 5):
                return word
        raise RuntimeError(f"could not coin a new {style} word")

    def look_alike(self, word: str) -> str | None:
        """A new word one vowel away from ``word`` (``Varnhoff`` -> ``Varnhaff``), or None."""
        lower = word.lower()
        # Single vowels between consonants (never the last letter), or a vowel pair swapped for
        # another pair: no new vowel clusters, so the look-alike stays pronounceable.
        options: list[tuple[int, int, tuple[str, ...]]] = []
        for i in range(1, len(lower) - 1):
            if lower[i - 1] in "aeiouy" or lower[i] not in "aeiouy":
                continue
            if lower[i + 1] not in "aeiouy":
                options.append((i, 1, tuple(v for v in "aeiou" if v != lower[i])))
            elif lower[i : i + 2] in _PAIRS and (
                i + 2 == len(lower) or lower[i + 2] not in "aeiouy"
            ):
                options.append((i, 2, tuple(p for p in _PAIRS if p != lower[i : i + 2])))
        for _ in range(50 if options else 0):
            position, width, replacements = self.rng.choice(options)
            replacement = self.rng.choice(replacements)
            candidate = (lower[:position] + replacement + lower[position + width :]).capitalize()
            if self.claim(candidate, shortest=4):
                return candidate
        return None


# ---------------------------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------------------------


@dataclass
class _Entity:
    name: str
    kind: str  # person | organisation | work | city | region | country
    subtype: str  # occupation, organisation kind, work kind, city description
    facts: dict[str, str] = field(default_factory=dict)
    decoy: bool = False
    gender: str = ""  # "she" | "he" for people
    honorific: str = ""
    token: str = ""  # the coined word a look-alike is made from


@dataclass(frozen=True)
class _PassageInfo:
    subject: str  # entity name (the passage title)
    relations: tuple[str, ...]  # question relations the passage states ("region", "country")
    role: str  # "fact" | "mention" | "decoy"
    sentences: tuple[str, ...]


@dataclass
class _World:
    entities: dict[str, _Entity]
    passages: tuple[Passage, ...]
    info: dict[str, _PassageInfo]
    tasks: tuple[RAGTask, ...]
    # task_id -> ((subject, relation, value), ...) hop by hop; the last value is the answer.
    chains: dict[str, tuple[tuple[str, str, str], ...]]


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {noun}"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mid(entity: _Entity, honorific: bool = False) -> str:
    """How prose names an entity inside a sentence."""
    if entity.kind == "person":
        return (
            f"{entity.honorific} {entity.name}" if honorific and entity.honorific else entity.name
        )
    if entity.kind == "organisation":
        return f"the {entity.name}"
    if entity.kind == "work" and entity.subtype in ("ship", "invention"):
        return f"the {entity.name}"
    return entity.name


def _question_ref(entity: _Entity) -> str:
    if entity.kind == "work" and entity.subtype != "invention":  # "the Tamsel Loom" says it
        return f"the {_WORK_NOUN[entity.subtype]} {entity.name}"
    return _mid(entity)


def _pronouns(entity: _Entity, rng: random.Random) -> tuple[str, str, str, str]:
    """(subject at a start, possessive at a start, subject pronoun, possessive pronoun)."""
    if entity.kind == "person":
        return (
            ("She", "Her", "she", "her") if entity.gender == "she" else ("He", "His", "he", "his")
        )
    if entity.kind == "organisation":
        noun = _ORG_KINDS[entity.subtype][1]
    elif entity.kind == "work":
        noun = _WORK_NOUN[entity.subtype]
    else:
        noun = {"city": "town", "region": "region", "country": "country"}[entity.kind]
    return rng.choice(("It", f"The {noun}")), "Its", "it", "its"


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"rag-world-{seed}")
        self.coiner = _Coiner(self.rng)
        self.entities: dict[str, _Entity] = {}
        self.by_kind: dict[str, list[_Entity]] = {}
        self.drafts: list[tuple[str, tuple[str, ...], _PassageInfo]] = []
        self.fact_passage: dict[tuple[str, str], int] = {}
        self.people_by_year: tuple[list[_Entity], list[int]] = ([], [])

    # --- entities ------------------------------------------------------------------------------

    def add(self, entity: _Entity) -> _Entity:
        if entity.name in self.entities:
            raise RuntimeError(f"duplicate entity name {entity.name!r}")
        self.entities[entity.name] = entity
        if not entity.decoy:
            self.by_kind.setdefault(entity.kind, []).append(entity)
        return entity

    def build_places(self) -> None:
        rng, sizes = self.rng, WORLD_SIZES
        for _ in range(sizes["countries"]):
            country = self.add(_Entity(self.coiner.coin("country"), "country", "country"))
            country_cities: list[_Entity] = []
            for _ in range(sizes["regions_per_country"]):
                region = self.add(_Entity(self.coiner.coin("region"), "region", "region"))
                region.facts["country"] = country.name
                cities = []
                for _ in range(sizes["cities_per_region"]):
                    token = self.coiner.coin("city")
                    city = self.add(_Entity(token, "city", rng.choice(_CITY_KINDS), token=token))
                    city.facts["region"] = region.name
                    city.facts["country"] = country.name
                    cities.append(city)
                region.facts["seat"] = rng.choice(cities).name
                country_cities.extend(cities)
            country.facts["capital"] = rng.choice(country_cities).name

    def build_people(self) -> None:
        rng = self.rng
        first_names = [
            (self.coiner.coin(f"first_{gender}", (1, 2)), gender)
            for gender in ("she", "he")
            for _ in range(140)
        ]
        occupations = [o for o, _, w in _OCCUPATIONS for _ in range(w)]
        honorific_of = {o: h for o, h, _ in _OCCUPATIONS}
        cities = self.by_kind["city"]
        for _ in range(WORLD_SIZES["people"]):
            first, gender = rng.choice(first_names)
            surname = self.coiner.coin("surname")
            occupation = rng.choice(occupations)
            person = self.add(
                _Entity(
                    f"{first} {surname}",
                    "person",
                    occupation,
                    gender=gender,
                    honorific=honorific_of[occupation],
                    token=surname,
                )
            )
            person.facts["born_in"] = rng.choice(cities).name
            person.facts["born_year"] = str(rng.randint(1720, 1940))
        people = sorted(self.by_kind["person"], key=lambda p: (int(p.facts["born_year"]), p.name))
        years = [int(p.facts["born_year"]) for p in people]
        for person in self.by_kind["person"]:
            if rng.random() < 0.55:
                mentor = self.person_born_between(people, years, person, -45, -15)
                if mentor is not None:
                    person.facts["mentor"] = mentor.name
        waiting: _Entity | None = None
        for person in people:
            if waiting is None:
                if rng.random() < 0.4:
                    waiting = person
            elif int(person.facts["born_year"]) - int(waiting.facts["born_year"]) <= 10:
                person.facts["spouse"], waiting.facts["spouse"] = waiting.name, person.name
                waiting = None
            else:
                waiting = person if rng.random() < 0.4 else None
        self.people_by_year = (people, years)

    def person_born_between(
        self, people: list[_Entity], years: list[int], anchor: _Entity, low: int, high: int
    ) -> _Entity | None:
        born = int(anchor.facts["born_year"])
        start = bisect.bisect_left(years, born + low)
        stop = bisect.bisect_right(years, born + high)
        choices = [p for p in people[start:stop] if p is not anchor]
        return self.rng.choice(choices) if choices else None

    def build_organisations(self) -> None:
        rng = self.rng
        people, years = self.people_by_year
        founders = [p for p in people if int(p.facts["born_year"]) <= 1940]
        kinds = [
            rng.choice(_GENERAL_ORG_KINDS) for _ in range(WORLD_SIZES["general_organisations"])
        ]
        for kind in _PRODUCER_KIND.values():
            kinds.extend([kind] * WORLD_SIZES["organisations_per_work_kind"])
        rng.shuffle(kinds)
        cities = self.by_kind["city"]
        for kind in kinds:
            stem = self.coiner.coin("org")
            org = self.add(_Entity(f"{stem} {kind}", "organisation", kind, token=stem))
            founder = rng.choice(founders)
            org.facts["founder"] = founder.name
            org.facts["founded_year"] = str(int(founder.facts["born_year"]) + rng.randint(25, 55))
            org.facts["headquarters"] = rng.choice(cities).name
            if rng.random() < 0.6:
                leader = self.person_born_between(people, years, founder, 15, 80)
                if leader is not None:
                    org.facts["leader"] = leader.name

    def build_works(self) -> None:
        rng = self.rng
        creators = {
            kind: [p for p in self.by_kind["person"] if p.subtype == _CREATOR_OF[kind]]
            for kind in _WORK_KINDS
        }
        producers = {
            kind: [o for o in self.by_kind["organisation"] if o.subtype == _PRODUCER_KIND[kind]]
            for kind in _WORK_KINDS
        }
        for kind in _WORK_KINDS:
            for _ in range(WORLD_SIZES["works_per_kind"]):
                token = self.coiner.coin("work")
                title = self.work_title(kind, token)
                work = self.add(_Entity(title, "work", kind, token=token))
                creator = rng.choice(creators[kind])
                work.facts["creator"] = creator.name
                year = int(creator.facts["born_year"]) + rng.randint(22, 60)
                work.facts["year"] = str(year)
                if rng.random() < 0.8:
                    options = [o for o in producers[kind] if int(o.facts["founded_year"]) <= year]
                    if options:
                        work.facts["producer"] = rng.choice(options).name

    def work_title(self, kind: str, token: str) -> str:
        pattern = self.rng.choice(_WORK_TITLES[kind])
        noun = self.rng.choice(_TITLE_NOUNS)
        article = "An" if noun[0] in "AEIOU" else "A"
        return pattern.format(T=token, N=noun, A=article, D=self.rng.choice(_DEVICES))

    def build_decoys(self) -> None:
        """Look-alike entities with similar facts; only their own passages mention them."""
        for kind, size in (
            ("city", "decoy_cities"),
            ("person", "decoy_people"),
            ("organisation", "decoy_organisations"),
            ("work", "decoy_works"),
        ):
            sources = list(self.by_kind[kind])
            self.rng.shuffle(sources)
            made = 0
            for source in sources:
                if made == WORLD_SIZES[size]:
                    break
                decoy = self.decoy_of(source)
                if decoy is not None:
                    made += 1
                    self.add(decoy)
                    group = ["region+country"] if kind == "city" else list(decoy.facts)
                    self.fact_passages(decoy, [group], role="decoy")

    def decoy_of(self, source: _Entity) -> _Entity | None:
        rng = self.rng
        cities = self.by_kind["city"]
        if source.kind == "city":
            token = self.coiner.look_alike(source.token)
            if token is None:
                return None
            other = rng.choice(cities)
            decoy = _Entity(token, "city", source.subtype, decoy=True, token=token)
            decoy.facts.update(region=other.facts["region"], country=other.facts["country"])
            return decoy
        if source.kind == "person":
            first, surname = source.name.split(" ", 1)
            if rng.random() < 0.7:
                surname = self.coiner.look_alike(surname) or ""
            else:
                first = self.coiner.look_alike(first) or ""
            if not first or not surname:
                return None
            decoy = _Entity(
                f"{first} {surname}",
                "person",
                source.subtype,
                decoy=True,
                gender=source.gender,
                honorific=source.honorific,
            )
            decoy.facts["born_in"] = rng.choice(cities).name
            decoy.facts["born_year"] = str(int(source.facts["born_year"]) + rng.randint(-6, 6))
            people, years = self.people_by_year
            mentor = self.person_born_between(people, years, decoy, -45, -15)
            if mentor is not None and rng.random() < 0.5:
                decoy.facts["mentor"] = mentor.name
            return decoy
        if source.kind == "organisation":
            kind = source.subtype
            stem: str | None = source.token
            if rng.random() < 0.3:
                kind = rng.choice([k for k in _ORG_KINDS if k != source.subtype])
            else:
                stem = self.coiner.look_alike(source.token)
            if stem is None:
                return None
            decoy = _Entity(f"{stem} {kind}", "organisation", kind, decoy=True)
            decoy.facts["founder"] = rng.choice(self.by_kind["person"]).name
            year = int(source.facts["founded_year"]) + rng.randint(-9, 9)
            decoy.facts["founded_year"] = str(year)
            decoy.facts["headquarters"] = rng.choice(cities).name
            return decoy
        token = self.coiner.look_alike(source.token)
        if token is None:
            return None
        title = source.name.replace(source.token, token)
        decoy = _Entity(title, "work", source.subtype, decoy=True, token=token)
        creators = [p for p in self.by_kind["person"] if p.subtype == _CREATOR_OF[source.subtype]]
        decoy.facts["creator"] = rng.choice(creators).name
        decoy.facts["year"] = str(int(source.facts["year"]) + rng.randint(-5, 5))
        return decoy

    # --- passages ------------------------------------------------------------------------------

    def sentence(self, entity: _Entity, pattern: str, first: bool, values: dict[str, str]) -> str:
        rng = self.rng
        start, possessive, pronoun, pronoun_possessive = _pronouns(entity, rng)
        name = _mid(entity, honorific=first)
        use_name = first or "{s}" in pattern or rng.random() < 0.5
        forms = {
            "S": _cap(name) if use_name else start,
            "P": f"{_cap(name)}'s" if use_name else possessive,
            "s": name,
            "pr": pronoun,
            "p": pronoun_possessive,
        }
        return _cap(pattern.format(**forms, **values))

    def values(self, entity: _Entity) -> dict[str, str]:
        rng = self.rng
        if entity.kind == "person":
            desc = entity.subtype
        elif entity.kind == "organisation":
            desc = _ORG_KINDS[entity.subtype][0]
        elif entity.kind == "work":
            desc = rng.choice(_WORK_DESCRIPTIONS[entity.subtype])
        else:
            desc = entity.subtype
        occupation = entity.subtype if entity.kind == "person" else ""
        return {
            "occ": occupation,
            "a_occ": _with_article(occupation),
            "desc": desc,
            "a_desc": _with_article(desc),
            "thing": rng.choice(_THINGS),
            "n": f"{rng.randint(3, 90)},000",
        }

    def fact_sentence(self, entity: _Entity, relations: list[str], first: bool) -> str:
        rng = self.rng
        facts = entity.facts
        values = self.values(entity)
        key = "+".join(relations)
        relation = relations[0]
        if entity.kind == "work" and relation in ("creator", "year", "producer"):
            key = f"{relation}:{entity.subtype}"
        values["Y"] = facts.get("born_year") or facts.get("founded_year") or facts.get("year", "")
        values["O"] = values["noun"] = values["R"] = values["C"] = ""
        if relation in ("born_in", "spouse", "mentor", "founder", "headquarters", "leader",
                        "creator", "producer", "seat", "capital"):  # fmt: skip
            target = self.entities[facts[relation]]
            values["O"] = _mid(target, honorific=rng.random() < 0.5)
            values["noun"] = "wife" if target.gender == "she" else "husband"
        if relation == "region+country" or (entity.kind == "region" and relation == "country"):
            values["R"] = facts.get("region", "")
            values["C"] = facts["country"]
        return self.sentence(entity, rng.choice(_FACTS[key]), first, values)

    def fact_passages(self, entity: _Entity, groups: list[list[str]], role: str = "fact") -> None:
        rng = self.rng
        for group in groups:
            pending = list(group)
            for pair in (("born_in", "born_year"), ("founder", "founded_year")):
                if set(pair) <= set(pending) and rng.random() < 0.6:
                    position = min(pending.index(pair[0]), pending.index(pair[1]))
                    pending = [r for r in pending if r not in pair]
                    pending.insert(position, "+".join(pair))
            units = [
                [relation] if relation == "region+country" else relation.split("+")
                for relation in pending
            ]
            sentences: list[str] = []
            if len(units) < 3 and rng.random() < 0.5:
                pattern = rng.choice(_INTROS[entity.kind])
                sentences.append(self.sentence(entity, pattern, True, self.values(entity)))
            for unit in units:
                sentences.append(self.fact_sentence(entity, unit, first=not sentences))
            if len(sentences) < 4 and rng.random() < 0.25:
                pattern = rng.choice(_FLAVOURS[entity.kind])
                sentences.append(self.sentence(entity, pattern, False, self.values(entity)))
            stated = tuple(part for relation in group for part in relation.split("+"))
            self.add_passage(entity, sentences, stated, role)

    def add_passage(
        self, entity: _Entity, sentences: list[str], relations: tuple[str, ...], role: str
    ) -> None:
        index = len(self.drafts)
        info = _PassageInfo(entity.name, relations, role, tuple(sentences))
        self.drafts.append((entity.name, tuple(sentences), info))
        if role == "fact":
            for relation in relations:
                if (entity.name, relation) in self.fact_passage:
                    raise RuntimeError(f"{entity.name}: {relation} stated twice")
                self.fact_passage[entity.name, relation] = index

    def build_fact_passages(self) -> None:
        rng = self.rng
        for kind in ("country", "region", "city", "person", "organisation", "work"):
            for entity in self.by_kind[kind]:
                relations = [r for r in entity.facts if r not in ("region", "country")]
                if kind == "city":
                    relations = ["region+country"]
                elif kind == "region":
                    relations = ["country", "seat"]
                rng.shuffle(relations)
                groups: list[list[str]] = []
                current: list[str] = []
                for relation in relations:
                    current.append(relation)
                    if len(current) == 3 or rng.random() < 0.45:
                        groups.append(current)
                        current = []
                if current:
                    groups.append(current)
                self.fact_passages(entity, groups)

    def build_mention_passages(self) -> None:
        rng, sizes = self.rng, WORLD_SIZES
        counts = {
            "person": sizes["mention_people"],
            "organisation": sizes["mention_organisations"],
            "work": sizes["mention_works"],
            "city": sizes["mention_cities"],
        }
        for kind, count in counts.items():
            for entity in rng.sample(self.by_kind[kind], count):
                patterns = rng.sample(_MENTIONS[kind], rng.choice((1, 2, 2)))
                sentences = []
                for pattern in patterns:
                    values = self.values(entity)
                    values.update(
                        E=_mid(self.other(entity, "person"), honorific=rng.random() < 0.5),
                        G=_mid(self.other(entity, "organisation")),
                        W=_mid(self.other(entity, "work")),
                        T=_mid(self.other(entity, "city")),
                        Y=str(rng.randint(1800, 2000)),
                    )
                    sentences.append(self.sentence(entity, pattern, not sentences, values))
                if rng.random() < 0.3:
                    pattern = rng.choice(_FLAVOURS[kind])
                    sentences.append(self.sentence(entity, pattern, False, self.values(entity)))
                self.add_passage(entity, sentences, (), "mention")

    def other(self, entity: _Entity, kind: str) -> _Entity:
        while True:
            choice = self.rng.choice(self.by_kind[kind])
            if choice is not entity:
                return choice

    # --- questions -----------------------------------------------------------------------------

    def noun_phrase(self, chain: list[_Entity], relations: tuple[str, ...]) -> str:
        """Describe the entity reached from ``chain[0]`` by ``relations``."""
        rng = self.rng
        phrase = _question_ref(chain[0])
        position = 0
        while position < len(relations):
            pair = tuple(relations[position : position + 2])
            if pair in _FOLDED_NOUN_PHRASES and rng.random() < 0.7:
                phrase = rng.choice(_FOLDED_NOUN_PHRASES[pair]).format(x=phrase)
                position += 2
                continue
            phrase = self.relation_phrase(_NOUN_PHRASES, chain, position, relations, phrase)
            position += 1
        return phrase

    def relation_phrase(
        self,
        table: dict[str, tuple[str, ...]],
        chain: list[_Entity],
        position: int,
        relations: tuple[str, ...],
        phrase: str,
    ) -> str:
        relation = relations[position]
        key = relation
        if relation in ("creator", "producer"):
            key = f"{relation}:{chain[position].subtype}"
        target = chain[position + 1] if position + 1 < len(chain) else None
        noun = "wife" if target is not None and target.gender == "she" else "husband"
        return self.rng.choice(table[key]).format(x=phrase, noun=noun)

    def question(self, chain: list[_Entity], relations: tuple[str, ...]) -> str:
        rng = self.rng
        last_pair = relations[-2:]
        if last_pair in _FOLDED_ASKS and rng.random() < 0.7:
            inner = self.noun_phrase(chain, relations[:-2])
            return rng.choice(_FOLDED_ASKS[last_pair]).format(x=inner)
        inner = self.noun_phrase(chain, relations[:-1])
        return rng.choice(_ASKS[relations[-1]]).format(x=inner)

    def build_tasks(self) -> tuple[list[RAGTask], dict[str, tuple[tuple[str, str, str], ...]]]:
        rng = self.rng
        candidates: list[tuple[str, list[_Entity], tuple[str, ...], str]] = []
        for template, start_kind, relations in _QUESTION_TEMPLATES:
            found = []
            for start in self.by_kind[start_kind]:
                chain = [start]
                value = ""
                for relation in relations:
                    value = chain[-1].facts.get(relation, "")
                    if not value:
                        break
                    if relation not in ("born_year", "founded_year"):
                        chain.append(self.entities[value])
                if not value:
                    continue
                names = [entity.name for entity in chain]
                if len(set(names)) != len(names) or (value in names[:-1]):
                    continue
                found.append((template, chain, relations, value))
            quota = _QUESTIONS_PER_TEMPLATE[len(relations)]
            candidates.extend(rng.sample(found, min(quota, len(found))))
        rng.shuffle(candidates)
        tasks: list[RAGTask] = []
        chains: dict[str, tuple[tuple[str, str, str], ...]] = {}
        seen: set[str] = set()
        for template, chain, relations, answer in candidates:
            question = self.question(chain, relations)
            if question in seen:
                continue
            seen.add(question)
            hops = tuple(
                (chain[i].name, relation, chain[i + 1].name if i + 1 < len(chain) else answer)
                for i, relation in enumerate(relations)
            )
            task_id = f"fv0-{short_digest(question, 10)}"
            support = tuple(f"@{self.fact_passage[s, r]}" for s, r, _ in hops)
            answer_entity = self.entities.get(answer)
            aliases: tuple[str, ...] = ()
            if answer_entity is not None and answer_entity.honorific:
                aliases = (f"{answer_entity.honorific} {answer_entity.name}",)
            tasks.append(
                RAGTask(task_id, question, answer, aliases, support, len(hops), CORPUS_ID, template)
            )
            chains[task_id] = hops
        return tasks, chains

    def build(self) -> _World:
        self.build_places()
        self.build_people()
        self.build_organisations()
        self.build_works()
        self.build_fact_passages()
        self.build_decoys()
        self.build_mention_passages()
        tasks, chains = self.build_tasks()
        order = list(range(len(self.drafts)))
        self.rng.shuffle(order)
        ids: dict[int, str] = {}
        passages: list[Passage] = []
        info: dict[str, _PassageInfo] = {}
        for position, draft_index in enumerate(order):
            title, sentences, passage_info = self.drafts[draft_index]
            passage_id = ids[draft_index] = f"fv0-{position:05d}"
            passages.append(Passage(passage_id, title, " ".join(sentences)))
            info[passage_id] = passage_info
        tasks = [
            RAGTask(
                task.task_id,
                task.question,
                task.answer,
                task.aliases,
                tuple(ids[int(ref[1:])] for ref in task.supporting_ids),
                task.hops,
                task.corpus_id,
                task.template,
            )
            for task in tasks
        ]
        return _World(self.entities, tuple(passages), info, tuple(tasks), chains)


def _split_of(question: str) -> str:
    return hash_split(question, test=TEST_PERCENT, out_of=100)


@functools.lru_cache(maxsize=8)
def _build_world(seed: int) -> _World:
    return _Builder(seed).build()


def generate_dataset(split: str = "train", *, seed: int = 0) -> RAGDataset:
    """The generated fictional-world questions of one split, with the shared corpus.

    Args:
        split: ``"train"`` (~85%) or ``"test"`` (~15%), disjoint as question texts; both
            splits get the same corpus ``"fictional-v0"`` (every passage of the world).
        seed: World seed; the same (split, seed) always gives the same data set.

    Returns:
        A new :class:`RAGDataset` (lists are fresh copies; safe to mutate).

    Raises:
        DatasetError: for an unknown split (the message lists the valid ones).
    """
    check_choice("split", split, SPLITS)
    world = _build_world(int(seed))
    tasks = [task for task in world.tasks if _split_of(task.question) == split]
    return RAGDataset(tasks=tasks, corpora={CORPUS_ID: list(world.passages)})
