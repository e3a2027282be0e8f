package migrations

import "testing"

func TestAllOrderedAndNamed(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Fatalf("want at least 2 migrations, got %d", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Version <= all[i-1].Version {
			t.Fatalf("migrations out of order: %d after %d", all[i].Version, all[i-1].Version)
		}
	}
	if all[0].Version != 1 || all[0].Name != "init" {
		t.Fatalf("first migration = %d_%s, want 0001_init", all[0].Version, all[0].Name)
	}
	if Latest() != all[len(all)-1].Version {
		t.Fatalf("Latest() = %d", Latest())
	}
}
