// The calls an article API makes, through the Go client oapi-codegen makes from the service's
// description (scripts/client-check generates it into ./neardup beside a copy of this module
// and runs this against a live `neardup serve`).
//
//	go run . URL INDEX ARTICLE_JSON DESCRIPTION_FILE LEAD_JSON
//
// ARTICLE_JSON is an article the index lacks, LEAD_JSON a lead excerpt of it. The description (what the service served) is
// also checked whole with kin-openapi, its examples against their schemas.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"

	"github.com/getkin/kin-openapi/openapi3"

	"neardup-client-check/neardup"
)

var checks int

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "go client: "+format+"\n", args...)
		os.Exit(1)
	}
	checks++
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintf(os.Stderr, "go client: %v\n", err)
		os.Exit(1)
	}
	return v
}

func has(matches []neardup.Match, id string) bool {
	for _, m := range matches {
		if m.Id == id {
			return true
		}
	}
	return false
}

func text(s string) *neardup.Text {
	var t neardup.Text
	must(0, t.FromTextString(s))
	return &t
}

func main() {
	url, index, descriptionFile := os.Args[1], os.Args[2], os.Args[4]
	var given struct{ Id, Title, Content string }
	must(0, json.Unmarshal([]byte(os.Args[3]), &given))
	ctx := context.Background()

	loader := openapi3.NewLoader()
	doc := must(loader.LoadFromFile(descriptionFile))
	must(0, doc.Validate(ctx, openapi3.EnableExamplesValidation()))

	client := must(neardup.NewClientWithResponses(url))
	health := must(client.HealthWithResponse(ctx))
	check(health.JSON200 != nil && health.JSON200.Status == neardup.Ok, "health: %s", health.Body)

	// Dedupe on ingest: a new article is stored (201) ...
	article := neardup.Article{Title: text(given.Title), Content: text(given.Content)}
	article.Set("published_at", "2026-11-23T08:00:00Z")
	dedupe := true
	put := must(client.PutArticleWithResponse(ctx, index, given.Id, &neardup.PutArticleParams{Dedupe: &dedupe}, article))
	check(put.StatusCode() == http.StatusCreated && put.JSON201 != nil, "PUT ?dedupe=true of a new article: %d %s", put.StatusCode(), put.Body)
	check(put.JSON201.Result == neardup.Created && put.JSON201.Index == index, "PUT answer: %s", put.Body)

	// ... and a near copy of it is not: 409 `duplicate`, with the stored article among the matches.
	var parts neardup.Text
	source, body, credit := "来源：青禾日报", given.Content, "（责任编辑：张三）"
	must(0, parts.FromTextList(neardup.TextList{&source, &body, &credit}))
	repost := neardup.Article{Title: text(given.Title), Content: &parts}
	dup := must(client.PutArticleWithResponse(ctx, index, given.Id+"-repost", &neardup.PutArticleParams{Dedupe: &dedupe}, repost))
	check(dup.StatusCode() == http.StatusConflict && dup.JSON409 != nil, "PUT ?dedupe=true of a near copy: %d %s", dup.StatusCode(), dup.Body)
	check(dup.JSON409.Error.Code == neardup.ErrorCodeDuplicate, "409 code: %s", dup.Body)
	check(dup.JSON409.Matches != nil && has(*dup.JSON409.Matches, given.Id), "409 matches lack %s: %s", given.Id, dup.Body)
	check(dup.JSON409.Relation != nil && *dup.JSON409.Relation == neardup.NearDuplicate, "409 relation: %s", dup.Body)

	// Near-duplicates of a stored article, by id.
	byID := must(client.SimilarByIdWithResponse(ctx, index, "ex-003", &neardup.SimilarByIdParams{}))
	check(byID.JSON200 != nil && has(byID.JSON200.Matches, "ex-003-repost"), "similar by id: %s", byID.Body)
	check(byID.JSON200.Query == neardup.FoundQueryStored && byID.JSON200.Method == neardup.Minhash, "similar by id: %s", byID.Body)

	// Near-duplicates of an article, by its text (its stored copy among them).
	threshold := 0.5
	byArticle := must(client.SimilarByArticleWithResponse(ctx, index, &neardup.SimilarByArticleParams{Threshold: &threshold}, article))
	check(byArticle.JSON200 != nil && has(byArticle.JSON200.Matches, given.Id) && byArticle.JSON200.Query == neardup.FoundQueryComputed,
		"similar by article: %s", byArticle.Body)
	check(byArticle.JSON200.Threshold != nil && *byArticle.JSON200.Threshold == 0.5, "similar by article, threshold: %s", byArticle.Body)

	// The refused near copy was not stored: 404 `not_found`.
	missing := must(client.SimilarByIdWithResponse(ctx, index, given.Id+"-repost", &neardup.SimilarByIdParams{}))
	check(missing.StatusCode() == http.StatusNotFound && missing.JSON404 != nil, "404: %d %s", missing.StatusCode(), missing.Body)
	check(missing.JSON404.Error.Code == neardup.ErrorCodeNotFound, "404 code: %s", missing.Body)

	// Fingerprints: `u64` is the SimHash as an unsigned 64-bit integer.
	fp := must(client.FingerprintWithResponse(ctx, article))
	check(fp.JSON200 != nil && fp.JSON200.Simhash != nil && fp.JSON200.Minhash != nil && len(*fp.JSON200.Minhash) == 128,
		"fingerprint: %s", fp.Body)
	hex, _ := new(big.Int).SetString(*fp.JSON200.Simhash, 16)
	check(fp.JSON200.U64 != nil && new(big.Int).SetUint64(*fp.JSON200.U64).Cmp(hex) == 0, "fingerprint u64: %s", fp.Body)

	// Many articles in one request (`{"articles": [...]}`): a near copy is refused on its own
	// (409 naming the stored article), and written without dedupe (201).
	copy := neardup.BulkArticle{Id: given.Id + "-bulk", Title: text(given.Title), Content: &parts}
	batch := neardup.BulkArticles{Articles: []neardup.BulkArticle{copy}}
	bulk := must(client.BulkArticlesWithResponse(ctx, index, &neardup.BulkArticlesParams{Dedupe: &dedupe}, batch))
	check(bulk.JSON200 != nil && bulk.JSON200.Errors && len(bulk.JSON200.Items) == 1, "bulk: %d %s", bulk.StatusCode(), bulk.Body)
	item := bulk.JSON200.Items[0]
	check(item.Status == http.StatusConflict && item.Id != nil && *item.Id == copy.Id, "bulk item: %s", bulk.Body)
	check(item.Error != nil && item.Error.Code == neardup.ErrorCodeDuplicate && item.Matches != nil && has(*item.Matches, given.Id),
		"bulk 409: %s", bulk.Body)
	bulk = must(client.BulkArticlesWithResponse(ctx, index, &neardup.BulkArticlesParams{}, batch))
	check(bulk.JSON200 != nil && !bulk.JSON200.Errors && bulk.JSON200.Items[0].Status == http.StatusCreated, "bulk without dedupe: %s", bulk.Body)

	// Relations: a stored lead excerpt of the article is a match the article `contains` (at a
	// threshold above their similarity), and is none with `containment=false`.
	var lead struct{ Title, Content string }
	must(0, json.Unmarshal([]byte(os.Args[5]), &lead))
	excerpt := neardup.Article{Title: text(lead.Title), Content: text(lead.Content)}
	putLead := must(client.PutArticleWithResponse(ctx, index, given.Id+"-lead", &neardup.PutArticleParams{}, excerpt))
	check(putLead.StatusCode() == http.StatusCreated, "PUT of the lead: %d %s", putLead.StatusCode(), putLead.Body)
	high, off := 0.9, false
	related := must(client.SimilarByIdWithResponse(ctx, index, given.Id, &neardup.SimilarByIdParams{Threshold: &high}))
	check(related.JSON200 != nil, "similar by id: %s", related.Body)
	contained := false
	for _, m := range related.JSON200.Matches {
		if m.Id == given.Id+"-lead" {
			contained = m.Relation != nil && *m.Relation == neardup.Contains && m.Containment != nil && *m.Containment >= 0.7
		}
	}
	check(contained, "similar by id, the lead contained: %s", related.Body)
	related = must(client.SimilarByIdWithResponse(ctx, index, given.Id, &neardup.SimilarByIdParams{Threshold: &high, Containment: &off}))
	check(related.JSON200 != nil && !has(related.JSON200.Matches, given.Id+"-lead"), "similar by id, containment=false: %s", related.Body)

	fmt.Printf("go: %d passed, 0 failed\n", checks)
}
