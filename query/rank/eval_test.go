package rank

import "testing"

// TestPersonalizedBeatsBaselines runs the real ranking over simulated
// users and asserts it beats popularity-only and recency-only rankings.
func TestPersonalizedBeatsBaselines(t *testing.T) {
	o := DefaultSimOptions()
	if testing.Short() {
		o.Users = 150
	}
	ev := Simulate(o, Options{})
	t.Logf("personalized: %v", ev.Personalized)
	t.Logf("popularity:   %v", ev.Popularity)
	t.Logf("recency:      %v", ev.Recency)
	for name, base := range map[string]Metrics{"popularity": ev.Popularity, "recency": ev.Recency} {
		if ev.Personalized.AUC < base.AUC+0.05 {
			t.Errorf("personalized AUC %.3f does not beat %s %.3f by 0.05", ev.Personalized.AUC, name, base.AUC)
		}
		if ev.Personalized.NDCG10 <= base.NDCG10 {
			t.Errorf("personalized nDCG@10 %.3f not above %s %.3f", ev.Personalized.NDCG10, name, base.NDCG10)
		}
	}
	if ev.Personalized.MaxPerSourceTop20 > 2 {
		t.Errorf("%d stories of one source in a top 20", ev.Personalized.MaxPerSourceTop20)
	}
}

func BenchmarkSimulatedUsers(b *testing.B) {
	var ev Evaluation
	for b.Loop() {
		ev = Simulate(DefaultSimOptions(), Options{})
	}
	b.ReportMetric(ev.Personalized.AUC, "auc")
	b.ReportMetric(ev.Popularity.AUC, "auc-popularity")
	b.ReportMetric(ev.Recency.AUC, "auc-recency")
	b.ReportMetric(ev.Personalized.MRR, "mrr")
	b.ReportMetric(ev.Popularity.MRR, "mrr-popularity")
	b.ReportMetric(ev.Recency.MRR, "mrr-recency")
	b.ReportMetric(ev.Personalized.NDCG10, "ndcg10")
	b.ReportMetric(ev.Popularity.NDCG10, "ndcg10-popularity")
	b.ReportMetric(ev.Recency.NDCG10, "ndcg10-recency")
	b.ReportMetric(ev.Personalized.Diversity, "diversity")
}
