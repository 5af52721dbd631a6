package auth

import (
	"testing"
)

func TestHasAdmin(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	check := func(want bool) {
		t.Helper()
		if got, err := e.HasAdmin(ctx); got != want || err != nil {
			t.Fatalf("HasAdmin = %v, %v; want %v", got, err, want)
		}
	}
	check(false)
	u := e.mustRegister(t, "amy", "amy's password")
	e.mustRegister(t, "zed", "zed's password")
	check(false)
	if _, err := e.SetRole(ctx, u.ID, RoleAdmin); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := e.DeleteUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	check(false)
}
