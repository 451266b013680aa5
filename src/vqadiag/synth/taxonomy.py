"""The fixed taxonomy of the synthetic world: classes, categories, attributes, places.

Every class belongs to one category and lists, in order of real-world tendency
(first = usually the most frequent), the colours, materials and states it can
have. How skewed the class-conditional priors over these values are is set by
``--bias`` (see :mod:`vqadiag.synth.priors`). Attribute values are disjoint
between families so an attribute names its family.
"""

from __future__ import annotations

from dataclasses import dataclass

COLORS: tuple[str, ...] = (
    "red", "orange", "yellow", "green", "blue", "purple", "pink",
    "brown", "black", "white", "gray", "silver", "clear",
)  # fmt: skip
MATERIALS: tuple[str, ...] = (
    "wood", "metal", "glass", "plastic", "fabric", "leather", "stone", "cotton",
    "silk", "wool", "denim", "straw", "rubber", "ceramic", "paper", "brick",
)  # fmt: skip
STATES: tuple[str, ...] = (
    "ripe", "unripe", "rotten", "raw", "cooked", "sliced", "standing", "sitting",
    "lying", "walking", "parked", "moving", "new", "old", "broken", "clean",
    "dirty", "folded", "empty", "full", "blooming", "wilted", "leafy", "bare",
)  # fmt: skip
SIZES: tuple[str, ...] = ("small", "large")

#: attribute families that are sampled from class-conditional priors (size is geometric)
FAMILIES: tuple[str, ...] = ("color", "material", "state")
FAMILY_VALUES: dict[str, tuple[str, ...]] = {
    "color": COLORS,
    "material": MATERIALS,
    "state": STATES,
    "size": SIZES,
}
ATTRIBUTE_FAMILY: dict[str, str] = {v: f for f, vals in FAMILY_VALUES.items() for v in vals}

PLACES: tuple[str, ...] = (
    "kitchen", "living room", "bedroom", "street", "farm", "market", "park",
)  # fmt: skip
INDOOR_PLACES: frozenset[str] = frozenset({"kitchen", "living room", "bedroom"})

#: relation names as they appear in scene graphs and questions (GQA spelling)
RELATIONS: tuple[str, ...] = (
    "to the left of", "to the right of", "on", "under", "near", "behind", "in front of",
)  # fmt: skip
#: short answers of "Is the X to the left or to the right of the Y?"
RELATION_ANSWER: dict[str, str] = {"to the left of": "left", "to the right of": "right"}

CATEGORIES: tuple[str, ...] = (
    "fruit", "vegetable", "animal", "vehicle", "furniture", "clothing",
    "kitchenware", "person", "plant", "structure",
)  # fmt: skip


@dataclass(frozen=True)
class ObjectClass:
    """One object class: name, category, typical box size and attribute supports."""

    name: str
    plural: str
    category: str
    size: tuple[float, float]  # typical (w, h) as fractions of the image width / height
    colors: tuple[str, ...]
    materials: tuple[str, ...]
    states: tuple[str, ...]
    support: bool = False  # other objects can be "on" it
    placeable: bool = False  # can be put on a support object

    def values(self, family: str) -> tuple[str, ...]:
        """The values this class can take in ``family`` (``color``/``material``/``state``)."""
        return {"color": self.colors, "material": self.materials, "state": self.states}[family]


def _c(name, plural, category, size, colors, materials="", states="", support=False, place=False):
    return ObjectClass(
        name,
        plural,
        category,
        size,
        tuple(colors.split()),
        tuple(materials.split()),
        tuple(states.split()),
        support,
        place,
    )


_RIPE = "ripe unripe rotten"
_VEG = "raw cooked sliced"
_ANIMAL = "standing sitting lying walking"
_VEHICLE = "parked moving"
_FURN = "new old broken"
_CLOTH = "clean dirty folded"
_CONTAINER = "empty full"
_UTENSIL = "clean dirty"

CLASSES: tuple[ObjectClass, ...] = (
    # fruit: state (ripeness) is a rule of colour, see RIPENESS_RULE
    _c("apple", "apples", "fruit", (0.06, 0.07), "red green brown yellow", "", _RIPE, place=True),
    _c("banana", "bananas", "fruit", (0.09, 0.05), "yellow green brown", "", _RIPE, place=True),
    _c("orange", "oranges", "fruit", (0.06, 0.06), "orange green brown", "", _RIPE, place=True),
    _c("lemon", "lemons", "fruit", (0.05, 0.05), "yellow green brown", "", _RIPE, place=True),
    _c("pear", "pears", "fruit", (0.05, 0.08), "yellow green brown", "", _RIPE, place=True),
    _c("grape", "grapes", "fruit", (0.06, 0.08), "purple green brown", "", _RIPE, place=True),
    _c(
        "strawberry",
        "strawberries",
        "fruit",
        (0.04, 0.04),
        "red green brown",
        "",
        _RIPE,
        place=True,
    ),
    _c("peach", "peaches", "fruit", (0.06, 0.06), "orange pink green brown", "", _RIPE, place=True),
    # vegetables
    _c("carrot", "carrots", "vegetable", (0.1, 0.04), "orange yellow purple", "", _VEG, place=True),
    _c("broccoli", "broccoli", "vegetable", (0.08, 0.08), "green yellow", "", _VEG, place=True),
    _c("tomato", "tomatoes", "vegetable", (0.06, 0.06), "red green yellow", "", _VEG, place=True),
    _c(
        "pepper",
        "peppers",
        "vegetable",
        (0.06, 0.08),
        "red green yellow orange",
        "",
        _VEG,
        place=True,
    ),
    _c("onion", "onions", "vegetable", (0.06, 0.06), "white purple yellow", "", _VEG, place=True),
    _c("potato", "potatoes", "vegetable", (0.06, 0.05), "brown yellow", "", _VEG, place=True),
    # animals
    _c("dog", "dogs", "animal", (0.2, 0.2), "brown black white gray", "", _ANIMAL, place=True),
    _c("cat", "cats", "animal", (0.14, 0.14), "gray black white orange", "", _ANIMAL, place=True),
    _c("horse", "horses", "animal", (0.3, 0.35), "brown black white", "", _ANIMAL),
    _c("cow", "cows", "animal", (0.3, 0.3), "black white brown", "", _ANIMAL),
    _c("sheep", "sheep", "animal", (0.2, 0.18), "white black gray", "", _ANIMAL),
    _c(
        "bird",
        "birds",
        "animal",
        (0.06, 0.06),
        "black white blue red brown",
        "",
        _ANIMAL,
        place=True,
    ),
    _c("elephant", "elephants", "animal", (0.4, 0.4), "gray brown", "", _ANIMAL),
    _c("giraffe", "giraffes", "animal", (0.25, 0.5), "yellow brown", "", _ANIMAL),
    _c("zebra", "zebras", "animal", (0.3, 0.3), "white black", "", _ANIMAL),
    _c("bear", "bears", "animal", (0.3, 0.3), "brown black white", "", _ANIMAL),
    # vehicles
    _c("car", "cars", "vehicle", (0.3, 0.2), "white black silver red blue gray", "metal", _VEHICLE),
    _c("bus", "buses", "vehicle", (0.5, 0.35), "yellow white red blue", "metal", _VEHICLE),
    _c("truck", "trucks", "vehicle", (0.4, 0.3), "white red blue black", "metal", _VEHICLE),
    _c("bicycle", "bicycles", "vehicle", (0.2, 0.15), "black red blue", "metal", _VEHICLE),
    _c("motorcycle", "motorcycles", "vehicle", (0.22, 0.17), "black red silver", "metal", _VEHICLE),
    _c("train", "trains", "vehicle", (0.6, 0.3), "red white blue", "metal", _VEHICLE),
    _c("boat", "boats", "vehicle", (0.35, 0.2), "white blue red", "wood metal plastic", _VEHICLE),
    _c("airplane", "airplanes", "vehicle", (0.5, 0.25), "white silver blue", "metal", _VEHICLE),
    # furniture (supports)
    _c(
        "table",
        "tables",
        "furniture",
        (0.35, 0.25),
        "brown white black",
        "wood metal glass plastic",
        _FURN,
        support=True,
    ),
    _c(
        "chair",
        "chairs",
        "furniture",
        (0.15, 0.25),
        "brown black white red",
        "wood metal plastic",
        _FURN,
        support=True,
    ),
    _c(
        "couch",
        "couches",
        "furniture",
        (0.45, 0.25),
        "gray brown blue red black",
        "fabric leather",
        _FURN,
        support=True,
    ),
    _c(
        "bed",
        "beds",
        "furniture",
        (0.5, 0.35),
        "white blue brown",
        "wood metal",
        _FURN,
        support=True,
    ),
    _c(
        "bench",
        "benches",
        "furniture",
        (0.35, 0.15),
        "brown gray green",
        "wood metal stone",
        _FURN,
        support=True,
    ),
    _c(
        "shelf",
        "shelves",
        "furniture",
        (0.3, 0.35),
        "brown white black",
        "wood metal glass",
        _FURN,
        support=True,
    ),
    _c(
        "desk",
        "desks",
        "furniture",
        (0.35, 0.25),
        "brown black white",
        "wood metal glass",
        _FURN,
        support=True,
    ),
    _c(
        "lamp",
        "lamps",
        "furniture",
        (0.08, 0.2),
        "white black silver",
        "metal glass plastic",
        _FURN,
    ),
    # clothing
    _c(
        "shirt",
        "shirts",
        "clothing",
        (0.12, 0.12),
        "white blue black red green",
        "cotton silk wool",
        _CLOTH,
        place=True,
    ),
    _c(
        "jacket",
        "jackets",
        "clothing",
        (0.15, 0.15),
        "black brown blue green",
        "leather wool cotton denim",
        _CLOTH,
        place=True,
    ),
    _c(
        "hat",
        "hats",
        "clothing",
        (0.07, 0.05),
        "black brown red white",
        "wool cotton straw",
        _CLOTH,
        place=True,
    ),
    _c(
        "shoe",
        "shoes",
        "clothing",
        (0.07, 0.04),
        "black brown white red",
        "leather fabric rubber",
        _CLOTH,
        place=True,
    ),
    _c(
        "dress",
        "dresses",
        "clothing",
        (0.14, 0.2),
        "red blue white black pink",
        "cotton silk",
        _CLOTH,
        place=True,
    ),
    _c(
        "scarf",
        "scarves",
        "clothing",
        (0.1, 0.06),
        "red blue gray green",
        "wool silk cotton",
        _CLOTH,
        place=True,
    ),
    _c(
        "skirt",
        "skirts",
        "clothing",
        (0.1, 0.1),
        "black blue red",
        "cotton denim silk",
        _CLOTH,
        place=True,
    ),
    _c(
        "sweater",
        "sweaters",
        "clothing",
        (0.13, 0.13),
        "gray red blue green",
        "wool cotton",
        _CLOTH,
        place=True,
    ),
    # kitchenware
    _c(
        "cup",
        "cups",
        "kitchenware",
        (0.05, 0.06),
        "white blue red black",
        "ceramic glass plastic paper",
        _CONTAINER,
        place=True,
    ),
    _c(
        "plate",
        "plates",
        "kitchenware",
        (0.1, 0.04),
        "white blue",
        "ceramic glass plastic",
        _UTENSIL,
        place=True,
    ),
    _c(
        "bowl",
        "bowls",
        "kitchenware",
        (0.08, 0.05),
        "white blue red",
        "ceramic glass wood plastic",
        _CONTAINER,
        place=True,
    ),
    _c(
        "bottle",
        "bottles",
        "kitchenware",
        (0.04, 0.1),
        "green brown clear blue",
        "glass plastic",
        _CONTAINER,
        place=True,
    ),
    _c(
        "knife",
        "knives",
        "kitchenware",
        (0.08, 0.02),
        "silver black",
        "metal plastic",
        _UTENSIL,
        place=True,
    ),
    _c(
        "fork",
        "forks",
        "kitchenware",
        (0.07, 0.02),
        "silver white",
        "metal plastic",
        _UTENSIL,
        place=True,
    ),
    _c(
        "spoon",
        "spoons",
        "kitchenware",
        (0.07, 0.02),
        "silver white",
        "metal wood plastic",
        _UTENSIL,
        place=True,
    ),
    _c(
        "vase",
        "vases",
        "kitchenware",
        (0.06, 0.12),
        "white blue green red",
        "glass ceramic",
        _CONTAINER,
        place=True,
    ),
    _c(
        "pot",
        "pots",
        "kitchenware",
        (0.1, 0.08),
        "silver black",
        "metal ceramic",
        _CONTAINER,
        place=True,
    ),
    # people (no colour)
    _c("man", "men", "person", (0.15, 0.45), "", "", "standing sitting walking"),
    _c("woman", "women", "person", (0.14, 0.43), "", "", "standing sitting walking"),
    _c("boy", "boys", "person", (0.1, 0.3), "", "", "standing sitting walking"),
    _c("girl", "girls", "person", (0.1, 0.3), "", "", "standing sitting walking"),
    # plants and structures
    _c("tree", "trees", "plant", (0.25, 0.5), "green brown yellow", "", "leafy bare"),
    _c(
        "flower",
        "flowers",
        "plant",
        (0.05, 0.07),
        "red yellow pink white purple",
        "",
        "blooming wilted",
        place=True,
    ),
    _c(
        "sign",
        "signs",
        "structure",
        (0.08, 0.12),
        "red white blue green yellow",
        "metal wood",
        "new old broken",
    ),
    _c(
        "fence",
        "fences",
        "structure",
        (0.4, 0.12),
        "white brown gray",
        "wood metal",
        "new old broken",
    ),
    _c(
        "building",
        "buildings",
        "structure",
        (0.4, 0.5),
        "white brown gray red",
        "brick stone glass",
        "new old",
    ),
)

CLASS_INDEX: dict[str, int] = {c.name: i for i, c in enumerate(CLASSES)}

#: how often each category appears in each place (relative weights; 0 = never)
PLACE_CATEGORY_WEIGHTS: dict[str, dict[str, float]] = {
    "kitchen": {"fruit": 3, "vegetable": 3, "kitchenware": 5, "furniture": 2, "person": 0.7,
                "animal": 0.3, "plant": 0.3},
    "living room": {"furniture": 4, "clothing": 1, "kitchenware": 1.5, "animal": 1,
                    "person": 1, "fruit": 0.7, "plant": 0.5},
    "bedroom": {"furniture": 3, "clothing": 3.5, "animal": 0.6, "person": 0.6,
                "kitchenware": 0.4},
    "street": {"vehicle": 4, "person": 2, "structure": 2.5, "plant": 1, "animal": 0.4},
    "farm": {"animal": 4, "vegetable": 1.2, "structure": 1.5, "plant": 1.5, "vehicle": 0.6,
             "person": 0.6},
    "market": {"fruit": 4, "vegetable": 4, "person": 2, "furniture": 1, "kitchenware": 1},
    "park": {"plant": 3, "person": 2, "animal": 1.5, "furniture": 0.8, "structure": 1,
             "vehicle": 0.5},
}  # fmt: skip
#: classes that only appear in some places (others follow their category's weight)
PLACE_ONLY: dict[str, frozenset[str]] = {
    "bed": frozenset({"bedroom"}),
    "couch": frozenset({"living room"}),
    "desk": frozenset({"bedroom", "living room"}),
    "lamp": frozenset({"bedroom", "living room"}),
    "bench": frozenset({"park", "street", "market"}),
    "airplane": frozenset({"street"}),
    "train": frozenset({"street"}),
    "boat": frozenset({"park"}),
    "elephant": frozenset({"park", "farm"}),
    "giraffe": frozenset({"park", "farm"}),
    "zebra": frozenset({"park", "farm"}),
    "bear": frozenset({"park"}),
    "cow": frozenset({"farm"}),
    "sheep": frozenset({"farm"}),
    "horse": frozenset({"farm", "park", "street"}),
    "building": frozenset({"street", "park", "farm", "market"}),
    "tree": frozenset({"street", "park", "farm", "market"}),
    "fence": frozenset({"street", "park", "farm"}),
    "sign": frozenset({"street", "park", "market", "farm"}),
}

# ---------------------------------------------------------------- rules of the world
#: ripeness of fruit follows from its colour
RIPENESS_RULE: dict[str, str] = {"green": "unripe", "brown": "rotten"}  # any other colour: ripe
#: clothing is warm exactly when made of one of these materials
WARM_MATERIALS: frozenset[str] = frozenset({"wool", "leather"})
#: wild animals (the others are domestic)
WILD_ANIMALS: frozenset[str] = frozenset({"bird", "elephant", "giraffe", "zebra", "bear"})
#: furniture one can sit on; free to sit on exactly when nothing is on it
SEATS: frozenset[str] = frozenset({"chair", "couch", "bench", "bed"})

RULES_TEXT: dict[str, str] = {
    "ripeness": "a fruit is unripe if green, rotten if brown, ripe otherwise",
    "warmth": "a piece of clothing is warm exactly when it is made of wool or leather",
    "wildness": "birds, elephants, giraffes, zebras and bears are wild; other animals are not",
    "seat_free": "one can sit on a chair, couch, bench or bed exactly when nothing is on it",
    "size": "an object is large if its box area exceeds 1.6x its class's typical area, small "
    "if below 0.6x (no size attribute otherwise)",
}


def ripeness(color: str) -> str:
    """The world's ripeness rule: green → unripe, brown → rotten, any other colour → ripe."""
    return RIPENESS_RULE.get(color, "ripe")
