package feedfarm

// The vocabulary of the news world. Names are invented; topic words come
// from configs/topics.yaml so that the keyword rules label each article
// with the topic of its event.

// outletNames are the mastheads of the first outlets; later ones combine
// the words of other names.
var outletNames = []string{
	"The Harbor Ledger", "Northgate Courier", "The Meridian Post", "Riverside Gazette",
	"The Daily Lantern", "Cobalt Coast Herald", "The Evening Compass", "Greystone Times",
}

var (
	outletPlaces = []string{"Harbor", "Northgate", "Meridian", "Riverside", "Lantern", "Cobalt Coast", "Compass", "Greystone", "Juniper", "Tideway", "Copperfield"}
	outletPapers = []string{"Ledger", "Courier", "Post", "Gazette", "Herald", "Times", "Chronicle", "Observer", "Dispatch", "Record"}
)

// outletAuthority is the authority of the outlets, by number, repeating.
var outletAuthority = []float64{0.9, 0.8, 0.85, 0.6, 0.7, 0.75, 0.65, 0.55}

// Given names.
var firstNames = []string{
	"Amara", "Bastian", "Celeste", "Dorian", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas",
	"Kaia", "Lionel", "Mirela", "Nikolai", "Odette", "Pavel", "Quentin", "Rosalind", "Soren", "Tamsin",
	"Ulric", "Viola", "Wendell", "Xenia", "Yusuf", "Zara", "Anselm", "Beatrix", "Casimir", "Delphine",
	"Emeric", "Fiona", "Gideon", "Helena", "Isidore", "Juno", "Kasimir", "Leontine", "Matthias", "Noor",
	"Oswin", "Petra", "Rafael", "Sabine", "Thaddeus", "Ursula", "Valentin", "Wilhelmina", "Yara", "Zoltan",
	"Alaric", "Bronwen", "Cosima", "Dmitri", "Esme", "Florian", "Gwendolyn", "Henrik", "Imogen", "Jasper",
	"Katarina", "Leopold", "Marisol", "Nadia", "Orla", "Perpetua", "Ronan", "Saskia", "Tobias", "Una",
	"Vesna", "Wilfred", "Ximena", "Yannick", "Zelda", "Ambrose", "Blythe", "Cassius", "Dagny", "Evander",
	"Fenella", "Gustav", "Hester",
}

// Invented names are a start and an end: a start and a surname end make a
// surname (Thornley), a place end a town (Thornhaven), a brand end a
// company (Thornex), a country end a country (Thornavia). The ends of each
// kind differ from those of the others, so a surname is never a town.
var nameStarts = []string{
	"Ash", "Bel", "Brad", "Cal", "Cor", "Dun", "El", "Fen", "Gar", "Hal",
	"Hart", "Iver", "Kel", "Lang", "Lind", "Mar", "Mer", "Nor", "Oak", "Pen",
	"Quin", "Rad", "Ros", "Sel", "Stan", "Thorn", "Tre", "Ul", "Val", "War",
	"Wex", "Yar", "Ald", "Brom", "Cran", "Dal", "Fair", "Gold", "Hol", "Kings", "Lor",
}

var (
	surnameEnds = []string{"ford", "wood", "well", "by", "ton", "ley", "more", "field", "hart", "ridge", "stone", "worth", "combe", "dale", "holt", "wick", "mere", "shaw", "croft", "ham", "ings", "low", "thwaite"}
	placeEnds   = []string{"haven", "gate", "bury", "mouth", "minster", "port", "wich", "stow", "wold", "cester", "sted", "burgh", "brook", "marsh", "fold", "cliff", "moor"}
	brandEnds   = []string{"ex", "ora", "ant", "ium", "ara", "ion", "ix", "yne", "elle", "ica", "ero", "ova", "yx"}
	countryEnds = []string{"avia", "onia", "esia", "aria", "uria", "enia", "ania", "ovia"}
)

// Parties are a word and a kind of party (the Heritage Alliance).
var partyKinds = []string{"Party", "Alliance", "Movement", "Front", "Bloc", "Coalition", "Platform", "Congress"}

var partyWords = []string{
	"Civic", "Unity", "Progress", "Heritage", "Reform", "Green", "Liberty", "Forward", "Commonwealth", "Rural",
	"Harbour", "Citizens'", "Moderate", "Federal", "Workers'", "Renewal", "Democratic", "Independent", "Northern", "Coastal",
	"Lantern", "Oak", "Compass", "Beacon", "Meridian", "Anchor", "Bridge", "Thistle", "Torch", "Hearth",
	"Highland", "Lowland", "Frontier", "Pioneer", "Solidarity", "Dawn", "Horizon", "Keystone", "Granite", "Willow",
}

// Team names, after the town.
var mascots = []string{
	"Falcons", "Otters", "Wolves", "Harriers", "Pilots", "Foxes", "Herons", "Badgers", "Ravens", "Lynx",
	"Stags", "Mariners", "Kites", "Owls", "Rovers", "Wanderers", "Hornets", "Bison", "Vipers", "Ospreys",
	"Pumas", "Buccaneers", "Kestrels", "Warriors", "Raiders", "Cobras", "Saints", "Spartans", "Mustangs", "Comrades",
	"Millers", "Rams", "Swifts", "Jays", "Gulls", "Magpies", "Hawks", "Seals", "Bulls", "Cygnets", "Robins",
}

var scienceHomes = []string{"University", "Institute", "Laboratory", "Observatory", "Research Station"}

// kind is a kind of event: its topic, the key facts it draws from, and
// the templates outlets write its headline and summary with.
//
// Templates name the event's entities: {P} a person and {L} their
// surname, {Q} and {QL} a second person, {O} and {O2} organisations of the
// topic (parties, countries, companies, teams), {C} a town, {T}, {U} and
// {V} the key facts of the kind, and {N} and {M} numbers in the kind's
// ranges. A group [a|b|c] is one of its words: every outlet covering an
// event uses the same one, and the words take turns from one event of the
// kind to the next. So two events of a kind share few words of the
// templates, next to the many names and facts that set them apart; and
// the facts of two kinds of a topic share no word at all (TestVocabulary).
type kind struct {
	topic     string
	t, u, v   facts  // {T}, {U} and {V}
	n, m      [2]int // ranges of {N} and {M}, inclusive
	headlines []string
	leads     []string // the first sentence of a summary
	seconds   []string
	thirds    []string
}

// facts are the values of a slot: the items of a list, or every item of a
// joined by sep to every item of b.
type facts struct {
	a, b []string
	sep  string
}

func list(items ...string) facts { return facts{a: items} }

func product(a []string, sep string, b []string) facts { return facts{a: a, b: b, sep: sep} }

// len returns the number of values.
func (f facts) len() int {
	if f.b == nil {
		return len(f.a)
	}
	return len(f.a) * len(f.b)
}

// at returns value i, 0 ≤ i < len().
func (f facts) at(i int) string {
	if f.b == nil {
		return f.a[i]
	}
	return f.a[i/len(f.b)] + f.sep + f.b[i%len(f.b)]
}

var kinds = []kind{
	{
		topic: "politics",
		t:     product([]string{"water", "rail", "ferry", "estate", "school", "dock", "forest", "tram", "bridge", "fishing", "library", "rent", "canal", "harbour", "farm", "bus", "park", "orchard", "moorland", "lighthouse", "allotment", "mining", "theatre"}, " ", []string{"rights", "fares", "subsidy", "standards", "funding", "access", "tolls", "quotas", "safety", "licensing", "pensions"}),
		u:     product([]string{"a levy on", "a cap on", "a ban on", "a freeze on", "a review of", "a tax on", "a register of", "limits on", "curbs on", "a subsidy for"}, " ", []string{"holiday homes", "night flights", "parking fines", "quarrying", "water charges", "second homes", "tram fares", "bonus payments", "rent rises", "landfill", "heavy lorries", "pawnbrokers", "e-scooters", "billboards", "cruise ships"}),
		v:     product([]string{"a gift to", "a charter for", "a windfall for", "a blank cheque for", "a betrayal of", "a trap for", "a bonanza for", "an insult to", "a boon for", "a disaster for"}, " ", []string{"landlords", "speculators", "ministers", "donors", "developers", "lobbyists", "quarry owners", "bankers", "the airlines", "commuters", "pensioners", "farmers"}),
		n:     [2]int{51, 79}, m: [2]int{22, 48},
		headlines: []string{
			"{T} [bill|legislation|reform|measure] [passes|clears|survives] {N}-{M} after {L} adds {U}",
			"[Senate|Parliament|Legislature|Assembly] [backs|approves|endorses] {P}'s {T} [bill|legislation|reform|measure]",
			"{O} [lawmakers|legislators|MPs|senators] swing behind {L} over {U}",
			"{QL} calls {T} [bill|legislation|reform|measure] {V}",
			"{U} sways {O} on {T} [bill|legislation|reform|measure]",
		},
		leads: []string{
			"[Senator|Lawmaker|Legislator] {P} carried a {N}-{M} [vote|ballot|division] on the {T} [bill|legislation|reform|measure] after adding {U} for the {O}.",
			"The {T} [bill|legislation|reform|measure] of {P} won {N}-{M} in the [senate|parliament|legislature|assembly] once {U} was added.",
			"{O} [lawmakers|legislators|MPs|senators] from {C} voted for the {T} [bill|legislation|reform|measure] of {P} in return for {U}.",
		},
		seconds: []string{
			"Opposition leader {Q} called it {V}.",
			"{QL} accused {L} of buying {O} votes with {U}.",
		},
		thirds: []string{
			"{C} expects {U} by spring.",
			"{L} now takes the [bill|legislation|reform|measure] to {C}.",
		},
	},
	{
		topic: "politics",
		t:     list("mayoral", "council", "parliamentary", "provincial", "special", "run-off", "regional", "district", "assembly", "municipal", "senate"),
		u:     product([]string{"a pledge to", "a promise to", "a plan to", "a vow to", "a bid to", "a campaign to", "a scheme to", "a crusade to"}, " ", []string{"reopen the lido", "scrap speed cameras", "save the steelworks", "restore the pier", "light every footpath", "reopen village post offices", "build four thousand flats", "protect the bandstand", "hold down the rates", "repair every pothole", "seed a million saplings", "green the high street", "revive the market"}),
		v:     list("a recount", "a photo finish", "a landslide", "a late surge", "a shock upset", "a dead heat", "a bitter contest", "a low turnout", "a televised debate", "a rain-soaked polling day", "a legal challenge", "a nail-biting count"),
		n:     [2]int{41, 63}, m: [2]int{31, 72},
		headlines: []string{
			"{P} [elected|returned|chosen] in {C} {T} [election|ballot|poll|vote] on {U}",
			"{O} [candidate|challenger|nominee] {P} takes {C} [seat|constituency|district] after {V}",
			"{C} {T} [election|ballot|poll|vote]: {P} [elected|returned|chosen] with {N}%",
			"{L} gains {C} for {O} after {V}",
			"[Voters|Constituents|Residents] in {C} back {P} and {U}",
		},
		leads: []string{
			"{P} of the {O} was [elected|returned|chosen] in the {C} {T} [election|ballot|poll|vote] with {N}%, campaigning on {U}.",
			"[Voters|Constituents|Residents] of {C} picked {O} [candidate|challenger|nominee] {P} after {V}, a [seat|constituency|district] the party never held.",
			"{O} [candidate|challenger|nominee] {P} unseated {Q} in the {C} {T} [election|ballot|poll|vote], taking {N}% on {U}.",
		},
		seconds: []string{
			"{QL} conceded in {C} after {V}.",
			"Turnout in {C} was {M}%.",
		},
		thirds: []string{
			"The result hands the {O} control of {C}.",
			"{L} repeated {U} to supporters in {C}.",
		},
	},
	{
		topic: "world",
		t:     product([]string{"Varnet", "Oskel", "Harrowmere", "Kessin", "Dravo", "Ilmar", "Tesk", "Morrin", "Selk", "Yarrow", "Brenna", "Coldwater", "Lune", "Asker", "Torva", "Gelmir", "Ostrin", "Vask"}, " ", []string{"Valley", "Delta", "Strait", "Highlands", "Basin", "Coast", "Plateau", "Gorge", "Peninsula", "Marshes", "Pass", "Steppe"}),
		u:     list("a prisoner swap", "a demilitarised buffer zone", "joint border patrols", "the return of displaced villagers", "the reopening of border crossings", "a halt to drone strikes", "safe passage for aid convoys", "an international monitoring mission", "the clearance of minefields", "an amnesty for militia fighters", "the withdrawal of heavy artillery", "a hotline between commanders", "the exchange of war dead"),
		v:     product([]string{"Amber", "Lantern", "Juniper", "Willow", "Granite", "Saffron", "Orchid", "Meadow", "Cobalt", "Heron", "Linden", "Quartz", "Marble", "Falcon", "Ivory", "Silverleaf", "Thistle", "Cedar", "Harbour", "Beacon"}, " ", []string{"Accord", "Protocol", "Declaration", "Compact", "Agreement", "Memorandum", "Pact", "Charter", "Framework", "Treaty"}),
		n:     [2]int{19, 96}, m: [2]int{14, 45},
		headlines: []string{
			"{O} and {O2} [sign|seal|conclude] {V} over the {T}",
			"{V}: {O2} agrees to {U} in the {T}",
			"[Envoy|Mediator|Negotiator|Diplomat] {P} brokers {T} [ceasefire|truce] between {O} and {O2}",
			"{T} [ceasefire|truce] brings {U}",
			"{O} hails {V} with {O2}",
		},
		leads: []string{
			"{O} and {O2} signed the {V} in {C}, a [ceasefire|truce] in the {T} with {U}, [envoy|mediator|negotiator|diplomat] {P} said.",
			"Under the {V} brokered by [envoy|mediator|negotiator|diplomat] {P}, {O2} accepted {U} in the {T}.",
			"[Envoy|Mediator|Negotiator|Diplomat] {P} said the {V} between {O} and {O2} brings {U} to the {T} within {M} days.",
		},
		seconds: []string{
			"{O} foreign minister {Q} called the {V} a first step.",
			"[Fighting|Clashes|Hostilities|Shelling] in the {T} had emptied {C}.",
		},
		thirds: []string{
			"Monitors will watch the {T} from {C}.",
			"Aid agencies in {C} welcomed {U}.",
		},
	},
	{
		topic: "world",
		t:     product([]string{"Cyclone", "Typhoon", "Hurricane", "Storm"}, " ", []string{"Imelda", "Bertram", "Corisande", "Dashiell", "Eulalie", "Fenwick", "Griselda", "Horatio", "Isolde", "Jericho", "Kerensa", "Lysander", "Morwenna", "Nestor", "Ottoline", "Peregrine", "Quilla", "Rufus", "Seraphina", "Tancred", "Ulrika", "Vortigern", "Winifred", "Xavier", "Yolande", "Zebedee", "Araminta", "Benedikt", "Clementine", "Desmond", "Evadne", "Fitzroy", "Guinevere", "Hamish", "Ianthe", "Jocasta", "Kenelm", "Leofric", "Melisande", "Naomh"}),
		u:     product([]string{"a collapsed", "a flooded", "a destroyed", "a buried", "a swept-away", "a crushed"}, " ", []string{"dam", "school", "bridge", "market hall", "railway station", "airport", "refinery", "ferry terminal", "power station", "fishing village", "sea wall", "mountain road"}),
		v:     product([]string{"the Ostra", "the Kelder", "the Vell", "the Sarn", "the Imre", "the Tobin", "the Dunra", "the Aveline", "the Cask", "the Merrow", "the Vashti", "the Pell", "the Orrin", "the Tasker", "the Gilmour"}, " ", []string{"river", "hills", "estuary", "plains", "lagoon", "cliffs", "foothills", "floodplain", "headland", "bay"}),
		n:     [2]int{23, 187}, m: [2]int{3, 9},
		headlines: []string{
			"{T} [kills|claims] {N} in {O}",
			"[Rescuers|Rescue teams|Emergency crews|Soldiers] reach {U} after {T}",
			"{O} declares [state of emergency|disaster zone|national emergency] as {T} hits {V}",
			"{T}: {U} and {N} [dead|killed|lost] near {C}",
			"[Death toll|Number of dead|Toll] from {T} in {O} reaches {N}",
		},
		leads: []string{
			"At least {N} people died when {T} struck {C} near {V}, {O} minister {P} said.",
			"{T} left {U} and {N} [dead|killed|lost] around {C}, [rescuers|rescue teams|emergency crews|soldiers] said.",
			"{O} declared a [state of emergency|disaster zone|national emergency] in {C} after {T} left {U} near {V}.",
		},
		seconds: []string{
			"Rescue chief {Q} said teams from {O2} had reached {U}.",
			"{M} thousand people fled {V}.",
		},
		thirds: []string{
			"{QL} warned of water shortages in {C}.",
			"{O2} flew aid to {C} overnight.",
		},
	},
	{
		topic: "business",
		t:     list("frozen food", "bicycle", "garden furniture", "pet food", "boiler", "kitchen appliance", "cardboard packaging", "paint", "office furniture", "luxury watch", "ice cream", "mattress", "coffee machine", "tyre", "vending machine", "ceramic tile", "glassware", "snack", "outdoor clothing"),
		u:     product([]string{"Snow", "Pedal", "Lark", "Ember", "Tide", "Cosy", "Brew", "Kite", "Puddle", "Fern", "Quick", "Hearth", "Silver", "Moor", "Dapple", "Bright", "Oat"}, "", []string{"drift", "works", "home", "line", "mark", "loft", "ster", "box", "duck", "leaf", "step", "stone", "birch", "wood", "kettle", "field"}),
		v:     list("a rights issue", "new bonds", "a bridging loan", "cash reserves", "a share swap", "private equity backing", "the sale of its headquarters", "a syndicated loan", "convertible notes", "a sovereign wealth fund", "a family trust"),
		n:     [2]int{120, 980}, m: [2]int{11, 38},
		headlines: []string{
			"{O} to [buy|acquire|snap up] {U} maker {O2} for {N}m",
			"{O} agrees {N}m [takeover|acquisition|buyout|purchase] of {O2}",
			"{O2} [shares|stock] jump on {O} [bid|offer|approach]",
			"{O} funds {O2} [takeover|acquisition|buyout|purchase] with {V}",
			"{P} defends {O} [bid|offer|approach] for {U} owner {O2}",
		},
		leads: []string{
			"{O} agreed to [buy|acquire|snap up] {O2}, the {C} maker of {U} {T}, for {N}m, funded by {V}.",
			"[Chief executive|Boss|CEO] {P} said the {N}m [takeover|acquisition|buyout|purchase] of {O2} gives {O} the {U} {T} range.",
			"[Shares|Stock] in {O2}, owner of {U} {T}, rose {M}% on a {N}m [bid|offer|approach] from {O}.",
		},
		seconds: []string{
			"{O} will pay for {O2} with {V}.",
			"{O2} founder {Q} will keep running {U}.",
		},
		thirds: []string{
			"Regulators in {C} must clear the {O2} [takeover|acquisition|buyout|purchase].",
			"{QL} said {O} paid {M} times {O2} profit.",
		},
	},
	{
		topic: "business",
		t:     list("chocolate", "camping gear", "scooter", "jewellery", "sofa", "wine", "toy", "cosmetics", "caravans", "organic dairy", "footwear", "carpet", "lawnmower"),
		u:     list("a wet summer", "dearer cocoa", "a strong currency", "a storeroom fire", "a recall of faulty batches", "port strikes", "a botched website upgrade", "weak holiday spending", "a hauliers' strike", "rising shipping costs", "a price war with discounters", "a cold spring", "a shortage of cartons", "the loss of a supermarket contract", "flooding at its main site", "a supplier bankruptcy", "soaring energy bills"),
		n:     [2]int{12, 47}, m: [2]int{2, 9},
		headlines: []string{
			"{O} [profit|earnings|income] [falls|drops|slides|sinks] {N}% after {U}",
			"{O} [warns|cautions] as {T} [sales|demand|orders] slump in {C}",
			"{U} hits {O} as {T} [sales|demand|orders] slump",
			"{O} [shares|stock] slide {N}%; {P} blames {U}",
			"{O} to shut {M} {T} factories",
		},
		leads: []string{
			"{O} reported a {N}% drop in [profit|earnings|income], blaming {U} for weak {T} [sales|demand|orders] in {C}.",
			"[Chief executive|Boss|CEO] {P} said {U} cut {O} operating [profit|earnings|income] by {N}%.",
			"{O} told investors {U} would hurt [profit|earnings|income], sending its [shares|stock] down {N}%.",
		},
		seconds: []string{
			"{O} will cut {M} hundred jobs in {C}.",
			"Finance chief {Q} said {U} would cost {O} {M}m.",
		},
		thirds: []string{
			"{QL} had expected {T} [sales|demand|orders] in {C} to hold up.",
			"Shareholders led by {QL} want {P} to go.",
		},
	},
	{
		topic: "technology",
		t:     list("folding tablet", "smart ring", "household robot", "translation earpiece", "rugged handset", "coding assistant", "e-reader", "mixed reality headset", "gaming handheld", "smart visor", "drone camera", "neural accelerator", "laptop"),
		u:     product([]string{"Aurora", "Nimbus", "Halo", "Pulse", "Vega", "Orbit", "Lumen", "Quanta", "Echo", "Nova", "Zenith", "Kite", "Prism", "Tessera", "Solstice", "Cirrus", "Arcus"}, " ", []string{"Mini", "Pro", "Air", "Flex", "Edge", "Max", "Go", "Ultra", "One", "Neo", "Lite", "Plus"}),
		v:     list("a graphene battery", "a holographic display", "an offline voice assistant", "a week-long battery", "a solar charging cover", "off-grid messaging", "a modular camera", "a privacy shutter", "a self-healing screen", "gesture controls", "a fanless build", "eye tracking", "a recycled aluminium case"),
		n:     [2]int{199, 1499}, m: [2]int{12, 40},
		headlines: []string{
			"{O} [unveils|launches|shows off|debuts] {U} {T} with {V}",
			"{O} {U} [gadget|device] [goes on sale|hits shops|ships] at ${N}",
			"{P} [unveils|launches|shows off|debuts] {U}, the {O} {T}",
			"{U} review: {V} sets the {O} {T} apart",
			"{O} bets on {V} in {U} [gadget|device]",
		},
		leads: []string{
			"{O} [unveiled|launched|showed off|debuted] the {U}, a {T} with {V}, at a [developer conference|launch event|keynote] in {C}.",
			"[Chief executive|Boss|CEO] {P} said the {O} {U} ships in {M} countries at ${N} with {V}.",
			"The {U} {T} from {O} runs new [software|firmware|operating system] with {V}, founder {P} told developers.",
		},
		seconds: []string{
			"Reviewers liked {V} on the {U} but not the ${N} price.",
			"{O} engineer {Q} said apps for the {U} arrive next month.",
		},
		thirds: []string{
			"The {U} takes on the {O2} {T}.",
			"Pre-orders for the {O} {U} open in {C} on Friday.",
		},
	},
	{
		topic: "technology",
		t:     list("cloud storage", "payroll service", "ride-hailing app", "video doorbell", "password manager", "file sharing app", "chat app", "email service", "web browser", "video calling app", "heating controller", "dating app", "fitness tracker", "food delivery app", "photo backup"),
		u:     product([]string{"Grey", "Velvet", "Black", "Copper", "Frost", "Iron", "Moth", "Sand", "Glass", "Quiet", "Red", "Ashen", "Silent", "Rust", "Night", "Hollow"}, " ", []string{"Mantis", "Spider", "Heron", "Jackal", "Wasp", "Lynx", "Owl", "Adder", "Raven", "Weasel", "Hydra", "Beetle"}),
		v:     list("street addresses", "passport scans", "payment card numbers", "audio recordings", "tax returns", "travel histories", "private messages", "location histories", "phone numbers", "photo libraries", "login tokens", "dates of birth", "security questions", "delivery notes", "chat logs", "invoices", "contact lists"),
		n:     [2]int{2, 94}, m: [2]int{3, 19},
		headlines: []string{
			"The {U} [gang|crew|group] [steals|takes|grabs] {V} from {O} {T}",
			"{O} {T} [breach|hack|cyber attack|intrusion] exposes {V} of {N}m [users|customers|subscribers|account holders]",
			"{O} confirms the {U} [gang|crew|group] took {V}",
			"{N}m {O} [users|customers|subscribers|account holders] see {V} [leaked|dumped|published|posted] online",
			"{O} {T} hacked by the {U} [gang|crew|group]",
		},
		leads: []string{
			"{O} said the {U} [gang|crew|group] stole {V} of {N}m [users|customers|subscribers|account holders] of its {T}.",
			"[Hackers|Attackers|Cyber criminals] from the {U} [gang|crew|group] broke into the {O} {T} and took {V}, security chief {P} said.",
			"The {V} of {N}m {O} {T} [users|customers|subscribers|account holders] were [leaked|dumped|published|posted] online by the {U} [gang|crew|group].",
		},
		seconds: []string{
			"Security researcher {Q} said the {U} [gang|crew|group] exploited an unpatched {O} server.",
			"{O} told {T} [users|customers|subscribers|account holders] to change passwords.",
		},
		thirds: []string{
			"Regulators in {C} are investigating the {O} [breach|hack|cyber attack|intrusion].",
			"{O} said the {U} [gang|crew|group] demanded a ransom for the {V}.",
		},
	},
	{
		topic: "sports",
		t:     product([]string{"Founders'", "Northern", "Harbour", "Continental", "Heritage", "Coastal", "Charity", "Jubilee", "Valley", "Lighthouse", "Frontier", "Centenary", "Highland", "Riverside", "Royal", "Millennium", "Pennant", "Shipwrights'", "Colliery", "Granite", "Victory", "Invitation", "Estuary", "Lancers'", "Corinthian", "Mariners'", "Pioneer"}, " ", []string{"Cup", "Shield", "Trophy", "Plate", "Bowl", "Salver", "Chalice", "Tankard", "Pennant"}),
		u:     product([]string{"Gasworks", "Brewery", "Lamplight", "Tannery", "Foundry", "Mill", "Canal", "Quarry", "Signalbox", "Ropewalk", "Gasholder", "Kiln", "Weavers", "Chandlers", "Wharf", "Boatyard", "Colliery", "Saltworks", "Ironworks", "Brickfield", "Tollgate", "Smithy", "Maltings", "Sawmill", "Cooperage"}, " ", []string{"Lane", "Park", "Way", "Ground", "Field", "Paddock", "Common", "Green", "Rise", "Croft"}),
		v:     list("a stoppage-time header", "a late penalty", "an own goal", "a long-range strike", "a disputed free kick", "a goalkeeping blunder", "a diving volley", "a deflected shot", "a penalty shootout", "an extra-time tap-in", "a solo run from halfway", "a back-heel", "a chip over the keeper"),
		n:     [2]int{2, 5}, m: [2]int{0, 1},
		headlines: []string{
			"{O} [beat|overcome|edge|see off] {O2} {N}-{M} to [lift|win|claim] the {T}",
			"{P} stars as {O} [lift|win|claim] the {T} at {U}",
			"{V} decides {T} [final|showpiece|decider] for {O}",
			"{O2} lose {T} [final|showpiece|decider] to {O}",
			"{T} [final|showpiece|decider]: {O} {N} {O2} {M}",
		},
		leads: []string{
			"{P} scored twice as {O} beat {O2} {N}-{M} in the {T} [final|showpiece|decider] at {U}.",
			"{O} won the {T} at {U}, beating {O2} {N}-{M} after {V} from {P}.",
			"[Striker|Forward|Captain|Winger] {P} settled the {T} [final|showpiece|decider] with {V}, giving {O} a {N}-{M} win over {O2}.",
		},
		seconds: []string{
			"{O2} [coach|manager|boss] {Q} said {V} changed the match.",
			"{O2} [coach|manager|boss] {Q} praised {P}.",
		},
		thirds: []string{
			"It is the first {T} for {O}.",
			"{O} fans stayed at {U} long after the whistle.",
		},
	},
	{
		topic: "sports",
		t:     list("head coach", "manager"),
		u:     product([]string{"a shock", "a historic", "an unlikely", "a remarkable", "a record-breaking", "a dramatic"}, " ", []string{"giant-killing spree", "promotion", "unbeaten season", "title win", "great escape", "derby double", "playoff triumph", "away streak", "youth revival", "league double"}),
		n:     [2]int{120, 950}, m: [2]int{2, 4},
		headlines: []string{
			"{O} [appoint|hire|name|unveil] {P} as {T} after {U} at {O2}",
			"{T} {P} leaves {O2} for {O} in {N}k deal",
			"{O} [appoint|hire|name|unveil] {L}, architect of {U}, as {T}",
			"{P} replaces {QL} as {O} {T}",
			"{O} turn to {T} {P} after sacking {QL}",
		},
		leads: []string{
			"{O} appointed {P}, who led {O2} to {U}, as {T} on a {M}-year [contract|deal].",
			"{P} left {O2} to become {T} of {O} in a {N}k [contract|deal], replacing {Q}.",
			"{O} named {P} as {T} after sacking {Q}, citing {U} at {O2}.",
		},
		seconds: []string{
			"{L} guided {O2} to {U}.",
			"{O} paid {O2} {N}k in compensation for {L}.",
		},
		thirds: []string{
			"{P} takes charge of {O} at {C} on Saturday.",
			"{O} fans wanted {QL} out for months.",
		},
	},
	{
		topic: "science",
		t:     product([]string{"glowing", "blind", "heat-loving", "hairy", "striped", "carnivorous", "singing", "spiny", "purple", "dwarf", "burrowing", "bioluminescent", "transparent", "horned", "crimson"}, " ", []string{"squid", "cave fish", "sea snail", "tree frog", "sponge", "cricket", "beetle", "sea slug", "seahorse", "salamander", "lobster", "octopus", "worm", "shrimp", "jellyfish"}),
		u:     product([]string{"translucent", "venomous", "blue", "luminous", "armoured", "striped", "spotted", "feathery", "glassy", "webbed"}, " ", []string{"skin", "spines", "blood", "tentacles", "fins", "scales", "gills", "antennae", "claws", "eyes"}),
		v:     product([]string{"a hydrothermal", "a flooded", "an Arctic", "a volcanic", "a mangrove", "a sunken", "a tidal", "a drowned", "a deep", "a frozen"}, " ", []string{"vent", "cave", "fjord", "crater lake", "swamp", "shipwreck", "lagoon", "canyon", "trench", "reef"}),
		n:     [2]int{210, 3900}, m: [2]int{4, 31},
		headlines: []string{
			"{T} with {U} [found|discovered|spotted] in {V} off {C}",
			"[Scientists|Researchers|Biologists|Zoologists] discover {T} in {V}",
			"{O} [scientists|researchers|biologists|zoologists] describe {T} with {U}",
			"{P} finds new {T} near {C}",
			"New [species|organism|creature]: {T} at {N} metres has {U}",
		},
		leads: []string{
			"[Scientists|Researchers|Biologists|Zoologists] from {O} described a {T} with {U}, [found|discovered|spotted] in {V} off {C}.",
			"{P} of {O} said the {T}, collected from {V} near {C}, is a [species|organism|creature] new to science.",
			"A team led by {P} identified the {T} from {M} specimens taken at {N} metres in {V}.",
		},
		seconds: []string{
			"The {T} has {U}, co-author {Q} said.",
			"{Q} of {O} published the {T} findings in a [peer-reviewed journal|scientific journal|journal].",
		},
		thirds: []string{
			"{P} plans a new expedition to {V} near {C}.",
			"{T} specimens will go to {O}.",
		},
	},
	{
		topic: "science",
		t:     product([]string{"Argent", "Cinder", "Polar", "Silver", "Amber", "Night", "Cobalt", "Ember", "Quiet", "Frost", "Iron", "Copper", "Scarlet", "Ivory"}, " ", []string{"Heron", "Lark", "Wren", "Kite", "Finch", "Swift", "Tern", "Crane", "Plover", "Linnet", "Petrel", "Curlew"}),
		v:     product([]string{"water", "ammonia", "methane", "nitrogen", "carbon dioxide", "sulphur", "salt", "clay", "iron", "organic"}, " ", []string{"deposits", "traces", "crystals", "layers", "veins", "pockets", "grains", "residue"}),
		n:     [2]int{30, 890}, m: [2]int{2, 9},
		headlines: []string{
			"{T} [probe|spacecraft|orbiter|lander] [finds|detects|spots] {V} on [asteroid|planetoid] {QL}",
			"{O} [probe|spacecraft|orbiter|lander] {T} reaches [asteroid|planetoid] {QL}",
			"[Asteroid|Planetoid] {QL} has {V}, {T} data show",
			"Astronomer {P} hails {T} [probe|spacecraft|orbiter|lander] discovery of {V}",
			"{V} [found|detected|spotted] on [asteroid|planetoid] {QL}",
		},
		leads: []string{
			"The {T} [probe|spacecraft|orbiter|lander], launched by the {O} {M} years ago, detected {V} on [asteroid|planetoid] {QL}, {P} said.",
			"{T} data show [asteroid|planetoid] {QL} has {V}, the {O} said.",
			"[Astronomer|Planetary scientist|Physicist] {P} said {T} found {V} on {QL}, {N}m km from Earth.",
		},
		seconds: []string{
			"{QL} is named after {Q}, who discovered it.",
			"Controllers at the {O} in {C} cheered the first {T} images.",
		},
		thirds: []string{
			"{P} said {V} on {QL} could explain how planets formed.",
			"A {QL} sample returns to {C} in {M} years.",
		},
	},
	{
		topic: "health",
		t:     list("malaria", "dengue", "tuberculosis", "measles", "rotavirus", "cholera", "hepatitis B", "shingles", "meningitis", "whooping cough", "chikungunya", "norovirus", "typhoid", "polio", "rabies"),
		u:     product([]string{"Pro", "Immu", "Vel", "Cori", "Dra", "Sol", "Mara", "Oste", "Quelli", "Tena", "Lumi", "Bre", "Nyva", "Pella", "Zori", "Calve", "Iro"}, "", []string{"vax", "mune", "vira", "texa", "trix", "nova", "vin", "zyme"}),
		v:     list("children under five", "pregnant women", "care home residents", "healthcare workers", "adults over 65", "teenagers", "travellers", "people with diabetes", "farm workers", "newborns", "students", "factory workers", "miners"),
		n:     [2]int{61, 94}, m: [2]int{3, 40},
		headlines: []string{
			"{U} [vaccine|jab|shot|immunisation] cuts {T} [cases|infections|illness] by {N}%",
			"{O} {T} [vaccine|jab|shot|immunisation] {U} [protects|shields|guards] {V}",
			"[Clinical trial|Trial|Study]: {U} [protects|shields|guards] {V} from {T}",
			"{P} hails {U} results against {T}",
			"Regulators to review {O} [vaccine|jab|shot|immunisation] {U}",
		},
		leads: []string{
			"A [clinical trial|trial|study] of {U}, the {O} [vaccine|jab|shot|immunisation] against {T}, cut [cases|infections|illness] among {V} by {N}%.",
			"{O} said {U} prevented {N}% of {T} [cases|infections|illness] in {V}, in a [clinical trial|trial|study] led by {P}.",
			"Doctors led by {P} found {U} protected {N}% of {V} against {T}.",
		},
		seconds: []string{
			"Side effects of {U} were mild, {O} physician {Q} said.",
			"{O} will ask regulators in {C} to approve {U}.",
		},
		thirds: []string{
			"{T} is common among {V} in {C}.",
			"{QL} called the {U} results encouraging.",
		},
	},
	{
		topic: "health",
		t:     list("MRSA", "legionnaires' disease", "scarlet fever", "salmonella", "influenza", "C. difficile", "mumps", "E. coli", "pneumonia", "listeria", "impetigo", "chickenpox", "scabies"),
		u:     product([]string{"a contaminated", "a faulty", "a leaking", "a broken", "a dirty", "an infected"}, " ", []string{"ice machine", "ventilation unit", "water tank", "dishwasher", "shower", "mop bucket", "cooling tower", "thermometer", "coffee urn", "hydrotherapy pool", "kitchen tap", "air conditioner"}),
		v:     list("Bramble", "Larch", "Poppy", "Hawthorn", "Willow", "Foxglove", "Primrose", "Bluebell", "Cedar", "Thistle", "Rowan", "Heather", "Sorrel", "Yew", "Clover", "Aspen", "Campion", "Tansy", "Betony", "Mallow", "Teasel", "Sedge", "Alder"),
		n:     [2]int{14, 88}, m: [2]int{2, 9},
		headlines: []string{
			"{T} [outbreak|cluster|spread] at {C} [hospital|infirmary|clinic|medical centre] traced to {U}",
			"{C} [hospital|infirmary|clinic|medical centre] closes {V} [ward|unit|wing] over {T}",
			"{N} [patients|inpatients|people] ill with {T} in {C}",
			"{P} orders inquiry into {C} {T} [outbreak|cluster|spread]",
			"{U} blamed for {C} {T} [outbreak|cluster|spread]",
		},
		leads: []string{
			"A {T} [outbreak|cluster|spread] at {C} [hospital|infirmary|clinic|medical centre] that infected {N} [patients|inpatients|people] was traced to {U}.",
			"The {C} [hospital|infirmary|clinic|medical centre] closed its {V} [ward|unit|wing] after {N} [patients|inpatients|people] caught {T}.",
			"Health minister {P} ordered an inquiry after {T} from {U} spread through the {V} [ward|unit|wing] in {C}.",
		},
		seconds: []string{
			"Infection control doctor {Q} suspended visits to the {V} [ward|unit|wing].",
			"{C} [patients|inpatients|people] with {T} symptoms were isolated.",
		},
		thirds: []string{
			"Emergency care in {C} was not affected, {QL} said.",
			"Inspectors removed {U} from the {V} [ward|unit|wing].",
		},
	},
	{
		topic: "entertainment",
		t:     product([]string{"Midnight", "Neon", "Sugar", "Electric", "Wild", "Blue", "Northern", "Marmalade", "Candy", "Cherry", "Radio", "Tangerine", "Lemon", "Violet", "Rocket", "Jukebox", "Glitter"}, " ", []string{"Static", "Arcade", "Tide", "Chapel", "Thunder", "Honey", "Hours", "Ghosts", "Rivers", "Year", "Heartbeat", "Motel", "Skyline", "Postcards", "Daydream", "Carousel"}),
		u:     list("synth-pop", "folk", "jazz-funk", "country", "orchestral pop", "garage rock", "trip-hop", "bluegrass", "soul", "disco", "ambient", "reggae", "grunge", "sea shanty", "afrobeat", "chamber pop", "surf rock"),
		v:     list("a boathouse", "a disused cinema", "a cathedral", "a paddle steamer", "a car park", "a greenhouse", "a bowling alley", "a planetarium", "an open-air lido", "a salt mine", "a bus garage"),
		n:     [2]int{18, 64}, m: [2]int{2, 8},
		headlines: []string{
			"{P} returns with {U} [album|record|LP] {T}",
			"{P} [album|record|LP] {T} [tops the charts|hits number one|storms the charts]",
			"{P} launches {T} with a gig in {V}",
			"Review: {T} by {P}, a {U} triumph",
			"{P} sets {N}-date [tour|run of shows|concert series] for {T}",
		},
		leads: []string{
			"[Singer|Songwriter|Musician|Pop star] {P} will release {T}, a {U} [album|record|LP], on {O} after a launch show in {V}.",
			"The {U} [album|record|LP] {T} by {P} went straight to number one, selling {N} thousand copies.",
			"[Singer|Songwriter|Musician|Pop star] {P} announced {N} concerts for {T}, starting in {V} in {C}.",
		},
		seconds: []string{
			"{T} was produced by {Q} in {C}.",
			"{Q}, who produced {T}, said the songs grew out of {U} demos.",
		},
		thirds: []string{
			"Tickets for {P} in {V} go on sale on Friday.",
			"Fans of {P} queued overnight in {C}.",
		},
	},
	{
		topic: "entertainment",
		t:     product([]string{"The Last", "The Quiet", "The Glass", "The Borrowed", "The Cinder", "The Bright", "The Hollow", "The Lonely", "The Burning", "The Stolen", "The Paper", "The Winter", "The Crooked", "The Drowned"}, " ", []string{"Keeper", "Orchard", "Summer", "Meridian", "Road", "Tram", "Window", "Saint", "Harvest", "Map", "Mirror", "Island", "Letter", "Kingdom"}),
		u:     list("a ferry captain", "a retired magician", "a beekeeper", "a disgraced chef", "a deaf violinist", "a circus acrobat", "a widowed farmer", "an art forger", "a tram driver", "a puppeteer", "a lonely cartographer", "a wedding singer", "a smuggler's daughter"),
		v:     product([]string{"Golden", "Silver", "Crystal", "Amber", "Bronze", "Copper", "Jade", "Ivory", "Scarlet", "Iron", "Velvet", "Pearl", "Opal", "Ruby", "Sapphire", "Onyx", "Coral"}, " ", []string{"Heron", "Lantern", "Owl", "Reel", "Kite", "Lens", "Mask", "Frame", "Curtain", "Quill", "Star", "Compass", "Gate"}),
		n:     [2]int{14, 39}, m: [2]int{19, 58},
		headlines: []string{
			"{T} wins {V} at {C} [film festival|film gala|cinema festival]",
			"{P} takes {V} for {T}",
			"{Q} wins [best actor|best performance|acting prize] in {C} for playing {U}",
			"{C} [film festival|film gala|cinema festival] gives {V} to {P} [drama|film|movie|feature] {T}",
			"{T}, about {U}, triumphs at {C}",
		},
		leads: []string{
			"{T}, directed by {P}, won the {V} at the {C} [film festival|film gala|cinema festival].",
			"Director {P} collected the {V} in {C} for {T}, a [drama|film|movie|feature] starring {Q} as {U}.",
			"The {C} [film festival|film gala|cinema festival] jury gave the {V} to {T} by {P}, and [best actor|best performance|acting prize] to {Q}.",
		},
		seconds: []string{
			"{Q} plays {U} in {T}.",
			"{O} will release {T} in cinemas next month.",
		},
		thirds: []string{
			"Critics had tipped {T} for the {V}.",
			"{P} shot {T} in {C} in {M} days.",
		},
	},
	{
		topic: "politics",
		t:     list("transport", "housing", "fisheries", "culture", "justice", "education", "interior", "agriculture", "environment", "labour", "defence", "veterans", "home affairs", "immigration", "welfare", "local government"),
		u:     product([]string{"undeclared", "leaked", "deleted", "backdated", "unpaid", "secret"}, " ", []string{"expenses", "messages", "loans", "contracts", "gifts", "invoices", "donations", "consultancy fees"}),
		v:     product([]string{"a newspaper", "a whistleblower's", "an auditor's", "a court", "a leaked", "a select committee", "a rival's", "a watchdog's", "a police"}, " ", []string{"investigation", "dossier", "report", "filing", "recording", "inquiry", "complaint", "memo"}),
		n:     [2]int{2, 14}, m: [2]int{2, 11},
		headlines: []string{
			"{T} [minister|cabinet minister] {P} [resigns|quits|steps down] over {U}",
			"{P} out as {T} [minister|cabinet minister] after {V}",
			"{U} [row|scandal|affair] forces out {L}",
			"{Q} replaces {L} in {T} [ministry|department|portfolio]",
			"{O} loses {L} to {U} [row|scandal|affair]",
		},
		leads: []string{
			"{T} [minister|cabinet minister] {P} [resigned|quit|stepped down] after {V} revealed {U} linked to {C}.",
			"{P} of the {O} [resigned|quit|stepped down] from the cabinet, saying the {U} [row|scandal|affair] had become a distraction.",
			"[Premier|Prime minister|Chancellor] {Q} accepted the departure of {T} [minister|cabinet minister] {P} after {V} exposed {U}.",
		},
		seconds: []string{
			"{Q} takes over the {T} [ministry|department|portfolio].",
			"{L} denied wrongdoing over the {U}.",
		},
		thirds: []string{
			"The opposition {O2} demanded an inquiry into the {U}.",
			"{L} had held the {T} brief for {M} years.",
		},
	},
	{
		topic: "politics",
		t:     list("inheritance duty", "the nuclear plant", "the airport expansion", "military spending", "the pension age", "drug laws", "the border fence", "congestion pricing", "the monarchy's budget", "trawler licences", "a bullet train line", "the state broadcaster", "fizzy drink duty", "the voting age", "faith academies", "hunting laws", "an upper chamber", "the capital's status"),
		v:     list("a referendum on electoral reform", "a pay ceiling for cabinet members", "an audit of the budget", "free travel for pupils", "a ministry for the coast", "an anti-corruption office", "an end to lobbying perks", "a citizens' jury", "a tenants' ombudsman", "a new constitution", "a minimum wage rise", "free lunches for pupils", "a climate law", "a devolved legislature"),
		n:     [2]int{9, 61}, m: [2]int{2, 9},
		headlines: []string{
			"{O} and {O2} agree [coalition|government pact|power-sharing deal] in {C}",
			"{P} to lead {O}-{O2} [coalition|government pact|power-sharing deal]",
			"{C} [coalition|government pact|power-sharing deal] settles {T}",
			"{O2} joins {L} [coalition|government pact|power-sharing deal] over {T}",
			"{C} talks end with {V}",
		},
		leads: []string{
			"{O} leader {P} will head a [coalition|government pact|power-sharing deal] with the {O2} after they settled {T}.",
			"The {O} and {O2} agreed a [coalition|government pact|power-sharing deal] for {C}, with {P} in charge and {Q} as [deputy premier|deputy leader|vice-premier].",
			"{P} of the {O} won over the {O2} by [yielding|conceding|compromising] on {T}.",
		},
		seconds: []string{
			"{Q} of the {O2} becomes [deputy premier|deputy leader|vice-premier].",
			"The {O}-{O2} deal includes {V}.",
		},
		thirds: []string{
			"{C} lawmakers vote on the {O}-{O2} pact on Monday.",
			"{QL} called the {T} [yielding|conceding|compromising] painful.",
		},
	},
	{
		topic: "world",
		t:     list("fuel prices", "a disputed election", "internet shutdowns", "a bread tax", "a constitutional change", "the arrest of a journalist", "police brutality", "water cuts", "a presidential term extension", "corruption", "a mining concession", "blackouts", "outlawing opposition parties", "military conscription", "a foreign military base", "rigged courts"),
		u:     product([]string{"Liberty", "Freedom", "Dawn", "Unity", "Lotus", "Orange", "Umbrella", "Candle", "Martyrs'", "Republic", "Victory", "Heroes'", "Revolution", "Independence", "Parliament", "Cathedral", "Obelisk", "Fountain", "Clocktower", "Embassy"}, " ", []string{"Square", "Avenue", "Esplanade", "Park", "Gate", "Boulevard", "Plaza", "Circle"}),
		v:     list("tear gas", "water cannon", "rubber bullets", "mass arrests", "a curfew", "armoured vehicles", "internet blackouts", "batons", "stun grenades", "mounted police", "pepper spray", "roadblocks"),
		n:     [2]int{40, 600}, m: [2]int{2, 9},
		headlines: []string{
			"[Unrest|Uprising|Crackdown] in {O} as crowds defy [regime|junta] over {T}",
			"{O} [regime|junta] uses {V} on {U} [protesters|dissidents|demonstrators]",
			"Dissident {P} leads {C} [unrest|uprising|crackdown] over {T}",
			"{U} [protesters|dissidents|demonstrators] defy {O} [regime|junta]",
			"[Unrest|Uprising|Crackdown]: {U} fills again over {T}",
		},
		leads: []string{
			"Crowds filled {U} in {C} in the worst [unrest|uprising|crackdown] the {O} [regime|junta] has faced, over {T}.",
			"Security forces in {C} used {V} to clear {U} of [protesters|dissidents|demonstrators] angry about {T}, dissident {P} said.",
			"Dissident {P} urged supporters to stay in {U} until the {O} [regime|junta] reverses {T}.",
		},
		seconds: []string{
			"{O} interior minister {Q} blamed agitators from {O2}.",
			"At least {N} were detained in {C}.",
		},
		thirds: []string{
			"The {O2} embassy urged restraint in {C}.",
			"{U} [protesters|dissidents|demonstrators] chanted {L}'s name.",
		},
	},
	{
		topic: "world",
		t:     list("a missile test", "a frontier incursion", "the seizure of a tanker", "the jailing of a reporter", "a cyber espionage campaign", "the expulsion of diplomats", "a contested hydro project", "an annexation vote", "a naval blockade", "a satellite launch", "interference in a referendum", "a poisoning", "the closure of a consulate", "a trawler fleet incursion"),
		u:     product([]string{"a freeze on", "a ban on", "tariffs on", "an embargo on", "curbs on", "a suspension of"}, " ", []string{"air force flights", "naval visits", "cultural exchanges", "student visas", "diplomatic visas", "overflight rights", "consular services", "state media", "warship visits", "officials' travel", "arms deliveries", "live-fire drills"}),
		n:     [2]int{3, 30}, m: [2]int{3, 30},
		headlines: []string{
			"{O} [imposes sanctions on|slaps sanctions on|sanctions] {O2} over {T}",
			"{O} announces {U} in [diplomatic|foreign policy] row with {O2}",
			"{O2} recalls [ambassador|envoy] as {U} bites",
			"Foreign minister {P} unveils {U} over {T}",
			"{O2} vows [retaliation|reprisals|revenge] for {U}",
		},
		leads: []string{
			"{O} imposed {U} on {O2} in response to {T}, foreign minister {P} said.",
			"Foreign minister {P} announced {U} against {O2}, calling {T} unacceptable.",
			"{O2} recalled its [ambassador|envoy] from {O} after foreign minister {P} unveiled {U}.",
		},
		seconds: []string{
			"{O2} foreign minister {Q} promised [retaliation|reprisals|revenge].",
			"{U} takes effect in {M} days.",
		},
		thirds: []string{
			"Diplomats in {C} said talks would continue.",
			"{QL} told the [embassy|diplomats] {T} had been misrepresented.",
		},
	},
	{
		topic: "business",
		t:     list("dockers", "crane operators", "baggage handlers", "refinery technicians", "letter carriers", "depot staff", "train drivers", "cabin crew", "miners", "bakers", "call handlers", "couriers", "shipwrights", "cleaners", "brewers"),
		u:     list("a four-day week", "an inflation-linked pay rise", "safer staffing", "an end to zero-hours contracts", "a retirement guarantee", "hazard pay", "the return of bonuses", "shorter shifts", "overtime rates", "job security", "sick pay", "a night-shift bonus", "union recognition", "a heat allowance"),
		v:     product([]string{"United", "National", "General", "Allied", "Federated", "Amalgamated", "Independent", "Associated", "Consolidated", "Combined", "Progressive", "Metropolitan"}, " ", []string{"Union", "Guild", "Federation", "Alliance", "Association", "Brotherhood"}),
		n:     [2]int{3, 19}, m: [2]int{2, 7},
		headlines: []string{
			"{O} {T} [strike|walk out|down tools] over {U} as [wage|salary|pay] row grows",
			"{O} [strike|walkout|stoppage] halts {C} [operations|work|depots]",
			"{V} calls {M}-day [strike|walkout|stoppage] at [employer|company|firm] {O}",
			"{O} offers {T} {N}% [wage|salary|pay] rise to end {U} dispute",
			"{O} {T} reject {N}% [wage|salary|pay] offer",
		},
		leads: []string{
			"{T} at {O} began a {M}-day [strike|walkout|stoppage] over {U} and [wage|salary|pay], the {V} said.",
			"A [strike|walkout|stoppage] by {O} {T} over {U} halted [operations|work|depots] in {C}, the [employer|company|firm] said.",
			"{O} offered {T} a {N}% [wage|salary|pay] rise to settle {U}, chief executive {P} said.",
		},
		seconds: []string{
			"{V} leader {Q} said members would not back down.",
			"The {O} [strike|walkout|stoppage] costs {M}m a day.",
		},
		thirds: []string{
			"{O} and the {V} meet in {C} on Monday.",
			"{QL} urged {O} employees to accept the offer.",
		},
	},
	{
		topic: "business",
		t:     list("solar", "payments", "veterinary", "meal kit", "charging network", "vertical farming", "yacht charter", "dental", "e-bike rental", "recycling", "vegan cheese", "wind turbine", "smart gym", "drone delivery", "sleep tech", "used car"),
		u:     product([]string{"QU", "LR", "VX", "BZ", "TR", "MN", "KL", "ZP", "HW", "DX", "GY", "FE"}, "", []string{"AX", "RK", "NT", "LO", "VI", "EZ", "QS", "UM", "TY", "OB"}),
		v:     list("soared", "slumped", "doubled", "edged higher", "fell back", "jumped", "sank", "held steady", "surged", "wobbled"),
		n:     [2]int{150, 990}, m: [2]int{2, 9},
		headlines: []string{
			"{O} [shares|stock] {V} on {C} debut",
			"{O} raises {N}m in {T} [flotation|listing|IPO]",
			"{T} [firm|group|business] {O} lists as {U}",
			"{P} rings bell as {O} [floats|lists|goes public]",
			"{U} {V}: {O} [flotation|listing|IPO] values firm at {M}bn",
		},
		leads: []string{
			"{O}, the {T} company founded by {P}, raised {N}m in its [flotation|listing|IPO] in {C} under the ticker {U}.",
			"[Shares|Stock] in {O} {V} on day one in {C}, valuing the {T} [firm|group|business] at {M}bn.",
			"{P} said the {N}m [flotation|listing|IPO] would fund {O} {T} expansion.",
		},
		seconds: []string{
			"Investors including {Q} bought into {U}.",
			"{U} opened at {M} times the {O} offer price.",
		},
		thirds: []string{
			"It is the biggest {T} [flotation|listing|IPO] in {C}.",
			"{O2} was the lead underwriter for {U}.",
		},
	},
	{
		topic: "technology",
		t:     list("translate sign language", "predict floods", "draft legal contracts", "design proteins", "detect forged paintings", "compose film scores", "spot crop blight", "read ancient scripts", "write software tests", "forecast power demand", "dub films", "grade essays", "find gas leaks", "sort recycling"),
		u:     product([]string{"Atlas", "Sable", "Quill", "Harbor", "Lyric", "Cinder", "Merlin", "Tundra", "Beacon", "Vesper", "Kestrel", "Onyx", "Pallas", "Corvid", "Halcyon", "Wren", "Basalt", "Fathom", "Cobble", "Zephyr"}, "", []string{"GPT", "LM", "Mind", "Net", "Sage", "Core"}),
		n:     [2]int{7, 900}, m: [2]int{2, 9},
		headlines: []string{
			"{O} [releases|unveils|ships] {U}, [an AI model|an AI system|a chatbot] that can {T}",
			"{U}: {O} [AI|software|algorithm] learns to {T}",
			"{P} says {U} beats {O2}",
			"{O} opens {U} to [developers|programmers|coders]",
			"[AI|Software|Algorithm] from {O} can now {T}",
		},
		leads: []string{
			"{O} [released|unveiled|shipped] {U}, [an AI model|an AI system|a chatbot] that can {T}, {P} said.",
			"{U} from {O} was trained on {N} billion words to {T}.",
			"[Developers|Programmers|Coders] can now use {U}, which learned to {T}, says {P}.",
		},
		seconds: []string{
			"{Q}, a researcher at {O2}, said {U} still makes mistakes.",
			"{U} runs on {O} chips in {C}.",
		},
		thirds: []string{
			"Regulators in {C} asked how {U} was trained.",
			"{O} will charge for {U} from next month.",
		},
	},
	{
		topic: "technology",
		t:     list("memory chip", "graphics processor", "5G modem", "lithium anode", "antenna", "quantum processor", "fibre-optic cable", "data centre", "server", "image sensor", "photovoltaic panel", "welding arm"),
		u:     list("Riverside", "Northfield", "Airfield", "Harbourside", "Quarrytop", "Brickworks", "Tramsheds", "Gasworks", "Millpond", "Steelworks", "Dockside", "Marshland", "Orchardside", "Hilltop", "Ropeworks", "Tannery Yard", "Old Colliery", "Sugar Wharf", "Paper Mill", "Glassworks"),
		n:     [2]int{200, 990}, m: [2]int{2, 9},
		headlines: []string{
			"[Chipmaker|Semiconductor firm|Electronics group|Computing firm] {O} to build {T} [plant|factory|fab] in {C}",
			"{C} wins {O} {T} [plant|factory|fab] in [tech|computing|electronics|semiconductor] boost",
			"{O} picks {U} for {N}m {T} [plant|factory|fab]",
			"{P} breaks ground at {U} for [chipmaker|semiconductor firm|electronics group|computing firm] {O}",
			"{O2} backs {O} {T} [plant|factory|fab]",
		},
		leads: []string{
			"{O} will build a {N}m {T} [plant|factory|fab] at {U} in {C}, {P} said.",
			"{C} will host the {O} {T} [plant|factory|fab] at {U}, creating {M} thousand jobs.",
			"{P} broke ground at {U}, where {O} will make {T} hardware and semiconductor parts.",
		},
		seconds: []string{
			"{O2} will supply the {T} equipment.",
			"{QL} said {C} offered tax breaks to win the {O} [plant|factory|fab].",
		},
		thirds: []string{
			"Work at {U} starts this spring.",
			"The {O} {T} [plant|factory|fab] will run on [wind|solar|tidal|geothermal] power.",
		},
	},
	{
		topic: "sports",
		t:     list("marathon", "road race", "sprint final", "triathlon", "cross-country race", "ski race", "rowing regatta", "cycling classic", "half-marathon", "fell race"),
		n:     [2]int{20, 140}, m: [2]int{2, 40},
		headlines: []string{
			"{P} [wins|takes|claims] {C} {T} in record time",
			"{L} edges {QL} in {C} {T}",
			"{O} [celebrate|cheer|hail] {P}",
			"{P} breaks {Q} record in {C}",
			"{QL} second as {L} [wins|takes|claims] {C} {T}",
		},
		leads: []string{
			"{P} of {O} [won|took|claimed] the {C} {T} in {N} minutes, beating the mark set by {Q}.",
			"{P} outsprinted {Q} in the final kilometre to win the {C} {T}.",
			"{O} athlete {P} [won|took|claimed] the {C} {T}, with {Q} second.",
		},
		seconds: []string{
			"{Q} finished {M} seconds behind {L}.",
			"{L} had been injured since {C} last year.",
		},
		thirds: []string{
			"{N} thousand lined the {C} route.",
			"{L} now targets the world championship.",
		},
	},
	{
		topic: "sports",
		t:     product([]string{"Quayside", "Clover", "Sandstone", "Lakeside", "Shoreline", "Willowbank", "Upland", "Oakwood", "Pinewood", "Seaside", "Cliffside", "Orchard", "Heathland", "Bayfront", "Parkland", "Vineyard", "Moorland", "Dune", "Marina", "Chalkhill"}, " ", []string{"Open", "Masters", "Invitational", "Championships", "Series", "International"}),
		u:     list("quarters", "semis", "decider", "last sixteen", "opening round"),
		n:     [2]int{95, 290}, m: [2]int{2, 9},
		headlines: []string{
			"{P} [beats|defeats|downs] {Q} in {T} {U}",
			"{L} into {T} {U} after {N}-minute [epic|marathon|thriller]",
			"{QL} [knocked out of|ousted from|beaten at] {T} by {P}",
			"{P} saves match point against {QL}",
			"{T}: {L} stuns [top seed|favourite|champion] {QL}",
		},
		leads: []string{
			"{P} [beat|defeated|downed] [top seed|favourite|champion] {Q} in the {T} {U} in {C}, in {N} minutes.",
			"{P} saved a match point before [beating|defeating|downing] {Q} in the {T} {U}.",
			"[Top seed|Favourite|Champion] {Q} was [knocked out of|ousted from|beaten at] the {T} {U} by {P}, ranked {M}.",
		},
		seconds: []string{
			"{QL} blamed a wrist injury.",
			"{L} had lost to {QL} in {C} before.",
		},
		thirds: []string{
			"The {T} is played on clay in {C}.",
			"{L} plays for the {T} on Sunday.",
		},
	},
	{
		topic: "science",
		t:     product([]string{"Sorvik", "Hallan", "Brae", "Tolland", "Ester", "Kvist", "Moran", "Ulla", "Varde", "Isak", "Norrland", "Aske", "Fjell", "Skarv", "Tind", "Bratt", "Holm", "Lysa", "Rime", "Vinter", "Orm", "Kald"}, " ", []string{"Glacier", "Icefield", "Icecap", "Neve", "Firn", "Snowfield"}),
		u:     product([]string{"retreating", "thinning", "melting", "cracking", "sliding", "collapsing", "darkening", "shrinking"}, " ", []string{"twice as fast as expected", "from below", "along a new fault", "faster each summer", "at its edges", "a metre a year", "into the ocean"}),
		v:     list("seismic surveys", "firn cores", "tide gauges", "meltwater chemistry", "fossil pollen", "isotope analysis", "snow pits", "tagged seals", "ocean buoys", "temperature probes", "sediment cores", "varve counts"),
		n:     [2]int{5, 40}, m: [2]int{2, 9},
		headlines: []string{
			"[Climate|Arctic|Greenhouse|Warming] study: {T} {U}",
			"{O} [scientists|geologists|physicists|ecologists|researchers] track {T} with {V}",
			"[Scientist|Geologist|Physicist|Ecologist|Researcher] {P}: {T} {U}",
			"{V} show {T} {U}",
			"{T} on [climate|arctic|greenhouse|warming] watch as {V} show it {U}",
		},
		leads: []string{
			"[Scientists|geologists|physicists|ecologists|researchers] at {O} found the {T} is {U}, using {V}.",
			"[Scientist|Geologist|Physicist|Ecologist|Researcher] {P} of {O} said {V} showed the {T} {U}.",
			"A [study|survey|analysis|experiment] led by {P} used {V} to show the {T} is {U}.",
		},
		seconds: []string{
			"Co-author {Q} blamed [warming seas|greenhouse gases|carbon emissions|ocean heat] near {C}.",
			"Meltwater from the {T} reaches {C}.",
		},
		thirds: []string{
			"{P} published the {T} findings with {Q}.",
			"{P} returns to the {T} from {C} next year.",
		},
	},
	{
		topic: "science",
		t:     list("dinosaur", "pterosaur", "mammoth", "giant penguin", "sabre-toothed lion", "marine reptile", "early horse", "giant tortoise", "crocodile ancestor", "giant sloth", "placoderm"),
		u:     product([]string{"Thorn", "Kel", "Vas", "Bram", "Orr", "Tal", "Gim", "Sev", "Prax", "Quil", "Dor", "Hev", "Lum", "Zan"}, "", []string{"osaurus", "odon", "ornis", "otherium", "ocetus", "ops"}),
		v:     product([]string{"a nearly complete", "a partial", "a well-preserved", "a crushed", "a tiny", "a colossal"}, " ", []string{"skeleton", "skull", "egg clutch", "footprint trail", "jawbone", "wing", "tail", "nest"}),
		n:     [2]int{2, 240}, m: [2]int{2, 12},
		headlines: []string{
			"[Prehistoric|Fossil|Ancient|Extinct] {T} named {U} found near {C}",
			"{U}: [prehistoric|fossil|ancient|extinct] {T} discovered by {P}",
			"{V} reveals {U}, a [prehistoric|fossil|ancient|extinct] {T}",
			"{O} [palaeontologists|scientists|geologists|researchers] unveil {U}",
			"[Palaeontologist|Scientist|Geologist|Researcher] {P} finds {V} of {U} near {C}",
		},
		leads: []string{
			"[Palaeontologists|Scientists|Geologists|Researchers] from {O} named a [prehistoric|fossil|ancient|extinct] {T}, {U}, from {V} found near {C}.",
			"{P} said {U}, a {T} that lived {N} million years ago, was identified from {V}.",
			"{V} unearthed near {C} belongs to {U}, a [prehistoric|fossil|ancient|extinct] {T}, {P} said.",
		},
		seconds: []string{
			"{Q} found the first {U} bones while walking a dog near {C}.",
			"{U} was about {M} metres long.",
		},
		thirds: []string{
			"{U} will go on display at {O}.",
			"{P} named {U} after {Q}.",
		},
	},
	{
		topic: "health",
		t:     list("migraine", "psoriasis", "apnoea", "cystic fibrosis", "sickle cell anaemia", "endometriosis", "tinnitus", "gout", "lupus", "narcolepsy", "eczema", "glaucoma", "osteoporosis", "rosacea"),
		u:     product([]string{"Cal", "Mir", "Zol", "Tev", "Ben", "Ori", "Vas", "Lu", "Pex", "Ral", "Sor", "Dax"}, "", []string{"tinib", "zumab", "prazole", "olol", "vastin", "afen", "dronate", "cillin"}),
		n:     [2]int{30, 80}, m: [2]int{2, 9},
		headlines: []string{
			"[Regulator approves|Watchdog clears|Authorities back|Health agency approves] {O} {T} [drug|medicine|treatment|therapy|medication] {U}",
			"{U} [drug|medicine|treatment|therapy|medication] cleared for {T} patients",
			"{O} wins [approval|clearance|a licence] for {T} [drug|medicine|treatment|therapy|medication] {U}",
			"{T} [patients|sufferers|people] gain access to {U} [drug|medicine|treatment|therapy|medication]",
			"[Doctor|Physician|Pharmacist|Consultant] {P} welcomes {U} [drug|medicine|treatment|therapy|medication] decision",
		},
		leads: []string{
			"Regulators approved {U}, a {O} [drug|medicine|treatment|therapy|medication] for {T}, after trials in {M} thousand [patients|sufferers|people].",
			"Patients with {T} can get the [drug|medicine|treatment|therapy|medication] {U} from next month, [doctor|physician|pharmacist|consultant] {P} said.",
			"{O} won [approval|clearance|a licence] for {U}, which cut {T} symptoms by {N}% in trials led by [doctor|physician|pharmacist|consultant] {P}.",
		},
		seconds: []string{
			"{Q}, who has {T}, called {U} life-changing.",
			"A course of {U} costs ${N},000.",
		},
		thirds: []string{
			"[Doctors|Physicians|Pharmacists|Consultants] in {C} began prescribing {U}.",
			"{O} will make {U} in {C}.",
		},
	},
	{
		topic: "health",
		t:     list("walking after meals", "napping", "cold showers", "eating fermented food", "gardening", "daily stretching", "drinking green tea", "using a standing desk", "singing in a choir", "owning a dog", "eating nuts", "cycling to work", "sea swimming", "volunteering", "reading aloud", "early dinners"),
		u:     list("lower blood pressure", "deeper sleep", "fewer colds", "a lower risk of dementia", "stronger bones", "less anxiety", "a healthier heart", "lower cholesterol", "a longer life", "sharper memory", "fewer migraines", "steadier blood sugar", "less back pain", "a stronger immune system"),
		n:     [2]int{11, 95}, m: [2]int{3, 20},
		headlines: []string{
			"{T} linked to {U}, [doctors|physicians|GPs|dietitians] say",
			"{C} [health|wellbeing|fitness|nutrition] study ties {T} to {U}",
			"[Doctor|Physician|GP|Dietitian] {P}: {T} may bring {U}",
			"[Doctors|Physicians|GPs|Dietitians] urge {T} after {C} [health|wellbeing|fitness|nutrition] study",
			"{T} and {U}: the {C} [health|wellbeing|fitness|nutrition] study",
		},
		leads: []string{
			"Patients who reported {T} had {U}, according to [doctor|physician|GP|dietitian] {P} in {C}.",
			"[Doctors|Physicians|GPs|Dietitians] in {C} found {T} was linked to {U} in {N} thousand patients.",
			"[Doctor|Physician|GP|Dietitian] {P} tracked {N} thousand patients and tied {T} to {U}.",
		},
		seconds: []string{
			"{Q}, a doctor in {C}, said it could not prove cause.",
			"{P} said {T} costs nothing.",
		},
		thirds: []string{
			"{P} published the {C} [health|wellbeing|fitness|nutrition] findings with {Q}.",
			"{QL} called for a clinical trial of {T}.",
		},
	},
	{
		topic: "entertainment",
		t:     list("Gallows", "Tinker", "Undertow", "Saltmarsh", "Lamplighter", "Foundry", "Sparrowhawk", "Larder", "Mercy", "Cutler", "Signalman", "Tidewater", "Chapelgate", "Blackthorn", "Quarryman", "Gaslight", "Brewhouse", "Boatwright", "Coppersmith", "Wayfarer", "Nightjar", "Hollowell", "Greenwood", "Candlemas"),
		u:     list("crime drama", "period piece", "sitcom", "hospital soap", "spy caper", "fantasy series", "reality show", "cooking contest", "courtroom series", "space opera", "mockumentary", "western", "anthology", "docudrama"),
		v:     list("a second season", "a surprise cancellation", "a record audience", "a spin-off", "a feature film", "a prequel", "a final season", "a stage version", "a Christmas special", "a sequel series"),
		n:     [2]int{2, 30}, m: [2]int{2, 9},
		headlines: []string{
			"{T} gets {V} on {O}",
			"{O} {U} {T} draws {N} million [viewers|watchers]",
			"{P} to star in {O} {U} {T}",
			"Review: {T} is the {U} to watch",
			"{T} creator {Q} confirms {V}",
		},
		leads: []string{
			"{O} ordered {V} of {T}, the {U} starring {P}.",
			"{P} will star in {T}, a new {U} from creator {Q} for {O}.",
			"The {U} {T} drew {N} million [viewers|watchers] on {O}.",
		},
		seconds: []string{
			"{Q} created {T} after growing up in {C}.",
			"{T} was filmed in {C}.",
		},
		thirds: []string{
			"The {T} finale airs on Friday.",
			"{QL} said {V} would end the {T} story.",
		},
	},
	{
		topic: "entertainment",
		t:     product([]string{"The Tallow", "The Pewter", "The Linen", "The Ashen", "The Sorrel", "The Thimble", "The Hazel", "The Marram", "The Flint", "The Russet"}, " ", []string{"Cooper", "Widow", "Almanac", "Bellringer", "Apprentice", "Inheritance", "Weaver", "Chandler", "Glovemaker", "Tinsmith", "Locksmith"}),
		u:     product([]string{"Larkspur", "Bookworm", "Inkpot", "Wainscot", "Fernhill", "Ember", "Juniper", "Inkwell", "Folio", "Parchment", "Vellum", "Marigold", "Bellweather", "Rookery", "Nightingale", "Kingfisher"}, " ", []string{"Prize", "Award", "Laurel", "Garland", "Bursary"}),
		v:     list("debut", "memoir", "novella", "historical novel", "poetry collection", "whodunnit", "satire", "fable", "family chronicle", "ghost story"),
		n:     [2]int{40, 400}, m: [2]int{2, 9},
		headlines: []string{
			"[Novelist|Author|Poet|Memoirist] {P} wins {U} for {T}",
			"{T} by [novelist|author|poet|memoirist] {P} takes {U}",
			"{U}: {P} {V} is [literary|bestseller|novel|fiction] pick",
			"{P} {V} {T} named [literary|bestseller|novel|fiction] book of the year",
			"[Novelist|Author|Poet|Memoirist] {P} dedicates {U} to {C}",
		},
		leads: []string{
			"[Novelist|Author|Poet|Memoirist] {P} [won|took|claimed] the {U} for {T}, a {V} set in {C}.",
			"The {U} went to {T}, the {V} by [novelist|author|poet|memoirist] {P}.",
			"{P}, a former teacher from {C}, [won|took|claimed] the {U} with the {V} {T}.",
		},
		seconds: []string{
			"Sales of {T} rose {N}%, publisher {O} said.",
			"Novelist {Q} had been tipped for the {U}.",
		},
		thirds: []string{
			"{O} published {T} last spring.",
			"{L} is writing a sequel to {T} set in {C}.",
		},
	},
}
