package story

import (
	"slices"
	"testing"
)

func TestNameTokens(t *testing.T) {
	for _, c := range []struct {
		title, body string
		want        []string
	}{
		{"Bridge Party joins Halcroft coalition over trawler licences", "", []string{"bridge", "halcroft"}},
		{"Belfold lawmakers vote on the coalition pact on Monday", "", []string{"belfold"}},
		{"Belfold coalition deal: Yannick Crandale's party agrees pact", "", []string{"belfold", "crandale", "yannick"}},
		{"Euro Anxieties Wane as Bunds Top Treasuries, Spain Debt Rallies", "", nil},
		{"ECB unlikely to end sterilisation of SMP purchases - traders", "", []string{"ecb", "smp"}},
		{"The quake struck at dawn", "Rescuers reached Valparaíso on Tuesday. The Red Cross said 12 died.", []string{"cross", "red", "rescuer", "valparaiso"}},
	} {
		if got := nameTokens(c.title, c.body); !slices.Equal(got, c.want) {
			t.Errorf("names of %q %q: %q, want %q", c.title, c.body, got, c.want)
		}
	}
}
