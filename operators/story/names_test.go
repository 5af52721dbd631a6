package story

import (
	"slices"
	"testing"
)

func TestNameTokens(t *testing.T) {
	for _, c := range []struct {
		title, body         string
		strong, parts, weak []string
	}{
		{"Bridge Party joins Halcroft coalition over trawler licences", "", []string{"halcroft"}, nil, []string{"bridge"}},
		{"Belfold lawmakers vote on the coalition pact on Monday", "", nil, nil, []string{"belfold"}},
		{"Belfold coalition deal: Yannick Crandale's party agrees pact", "", []string{"crandale"}, nil, []string{"belfold", "yannick"}},
		{"Euro Anxieties Wane as Bunds Top Treasuries, Spain Debt Rallies", "", nil, nil, nil},
		{"ECB unlikely to end sterilisation of SMP purchases - traders", "", []string{"ecb", "smp"}, nil, nil},
		{"The quake struck at dawn", "Rescuers reached Valparaíso on Tuesday. The Red Cross said 12 died.", []string{"cross", "valparaiso"}, []string{"red"}, nil},
		{"Geologist Imogen Bromdale finds a skull", "A geologist from Belgate found it.", []string{"belgate", "bromdale"}, []string{"imogen"}, nil},
		{"Geologist Imogen Bromdale finds a skull", "", []string{"bromdale"}, []string{"imogen"}, []string{"geologist"}},
		{"A levy sways Reform Platform on rail", "", nil, []string{"reform"}, nil},
	} {
		strong, parts, weak := nameTokens(c.title, c.body)
		if !slices.Equal(strong, c.strong) || !slices.Equal(parts, c.parts) || !slices.Equal(weak, c.weak) {
			t.Errorf("names of %q %q: strong %q parts %q weak %q, want %q, %q and %q", c.title, c.body, strong, parts, weak, c.strong, c.parts, c.weak)
		}
	}
}
