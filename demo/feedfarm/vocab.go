package feedfarm

import (
	_ "embed"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// The vocabulary of the news world lives in vocab.yaml. Names are invented;
// topic words come from configs/topics.yaml so that the keyword rules label
// each article with the topic of its event.
var (
	// outletNames are the mastheads of the first outlets; later ones
	// combine outletPlaces and outletPapers. outletAuthority is the
	// authority of the outlets, by number, repeating.
	outletNames, outletPlaces, outletPapers []string
	outletAuthority                         []float64
	firstNames                              []string
	// Invented names are a start and an end: a start and a surname end
	// make a surname (Thornley), a place end a town (Thornhaven), a brand
	// end a company (Thornex), a country end a country (Thornavia). The
	// ends of each kind differ from those of the others, so a surname is
	// never a town.
	nameStarts, surnameEnds, placeEnds, brandEnds, countryEnds []string
	// Parties are a word and a kind of party (the Heritage Alliance);
	// teams a town and a mascot.
	partyKinds, partyWords, mascots, scienceHomes []string
	kinds                                         []kind
)

//go:embed vocab.yaml
var vocabYAML []byte

func init() {
	if err := loadVocabulary(vocabYAML); err != nil {
		panic(err) // vocab.yaml is part of the package; TestVocabulary reads it
	}
}

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

// vocabFile is the layout of vocab.yaml.
type vocabFile struct {
	OutletNames     []string   `yaml:"outlet_names"`
	OutletPlaces    []string   `yaml:"outlet_places"`
	OutletPapers    []string   `yaml:"outlet_papers"`
	OutletAuthority []float64  `yaml:"outlet_authority"`
	FirstNames      []string   `yaml:"first_names"`
	NameStarts      []string   `yaml:"name_starts"`
	SurnameEnds     []string   `yaml:"surname_ends"`
	PlaceEnds       []string   `yaml:"place_ends"`
	BrandEnds       []string   `yaml:"brand_ends"`
	CountryEnds     []string   `yaml:"country_ends"`
	PartyKinds      []string   `yaml:"party_kinds"`
	PartyWords      []string   `yaml:"party_words"`
	Mascots         []string   `yaml:"mascots"`
	ScienceHomes    []string   `yaml:"science_homes"`
	Kinds           []kindFile `yaml:"kinds"`
}

type kindFile struct {
	Topic     string    `yaml:"topic"`
	T         factsFile `yaml:"t"`
	U         factsFile `yaml:"u"`
	V         factsFile `yaml:"v"`
	N         [2]int    `yaml:"n"`
	M         [2]int    `yaml:"m"`
	Headlines []string  `yaml:"headlines"`
	Leads     []string  `yaml:"leads"`
	Seconds   []string  `yaml:"seconds"`
	Thirds    []string  `yaml:"thirds"`
}

type factsFile struct {
	A   []string `yaml:"a"`
	Sep string   `yaml:"sep"`
	B   []string `yaml:"b"`
}

func (f factsFile) facts() facts { return facts{a: f.A, b: f.B, sep: f.Sep} }

// loadVocabulary sets the vocabulary from the YAML document b.
func loadVocabulary(b []byte) error {
	var v vocabFile
	if err := yaml.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("feedfarm: vocab.yaml: %w", err)
	}
	outletNames, outletPlaces, outletPapers, outletAuthority = v.OutletNames, v.OutletPlaces, v.OutletPapers, v.OutletAuthority
	firstNames, nameStarts, surnameEnds, placeEnds = v.FirstNames, v.NameStarts, v.SurnameEnds, v.PlaceEnds
	brandEnds, countryEnds, partyKinds, partyWords = v.BrandEnds, v.CountryEnds, v.PartyKinds, v.PartyWords
	mascots, scienceHomes = v.Mascots, v.ScienceHomes
	kinds = make([]kind, len(v.Kinds))
	for i, k := range v.Kinds {
		kinds[i] = kind{topic: k.Topic, t: k.T.facts(), u: k.U.facts(), v: k.V.facts(), n: k.N, m: k.M,
			headlines: k.Headlines, leads: k.Leads, seconds: k.Seconds, thirds: k.Thirds}
	}
	for name, l := range map[string]int{"outlet_names": len(outletNames), "outlet_places": len(outletPlaces),
		"outlet_papers": len(outletPapers), "outlet_authority": len(outletAuthority), "first_names": len(firstNames),
		"name_starts": len(nameStarts), "surname_ends": len(surnameEnds), "place_ends": len(placeEnds),
		"brand_ends": len(brandEnds), "country_ends": len(countryEnds), "party_kinds": len(partyKinds),
		"party_words": len(partyWords), "mascots": len(mascots), "science_homes": len(scienceHomes), "kinds": len(kinds)} {
		if l == 0 {
			return fmt.Errorf("feedfarm: vocab.yaml: %s is empty", name)
		}
	}
	return nil
}
