// The calls an article API makes, through the Java client openapi-generator makes from the
// service's description (scripts/client-check generates it and runs this against a live
// `neardup serve`). Usage: ClientCheck URL INDEX ARTICLE_JSON LEAD_JSON (an article the index
// lacks, and a lead excerpt of it).

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.neardup.client.ApiClient;
import dev.neardup.client.ApiException;
import dev.neardup.client.ApiResponse;
import dev.neardup.client.api.ArticlesApi;
import dev.neardup.client.api.FingerprintApi;
import dev.neardup.client.api.ServiceApi;
import dev.neardup.client.api.SimilarApi;
import dev.neardup.client.model.Article;
import dev.neardup.client.model.BulkArticle;
import dev.neardup.client.model.BulkArticles;
import dev.neardup.client.model.BulkItem;
import dev.neardup.client.model.BulkResult;
import dev.neardup.client.model.ErrorCode;
import dev.neardup.client.model.ErrorResponse;
import dev.neardup.client.model.FingerprintRecord;
import dev.neardup.client.model.Found;
import dev.neardup.client.model.Health;
import dev.neardup.client.model.Match;
import dev.neardup.client.model.Relation;
import dev.neardup.client.model.Stored;
import dev.neardup.client.model.Text;
import dev.neardup.client.model.TextList;
import java.math.BigInteger;
import java.util.List;

public class ClientCheck {
    static int checks = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError("java client: " + what);
        }
        checks++;
    }

    static boolean has(List<Match> matches, String id) {
        return matches != null && matches.stream().anyMatch(m -> id.equals(m.getId()));
    }

    /** The error answer of a refused call, with its status. */
    static ErrorResponse refused(ApiException e, int status) throws Exception {
        check(e.getCode() == status, "expected " + status + ", got " + e.getCode() + ": " + e.getResponseBody());
        return ErrorResponse.fromJson(e.getResponseBody());
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], index = args[1];
        JsonObject given = JsonParser.parseString(args[2]).getAsJsonObject();
        String id = given.get("id").getAsString();
        String title = given.get("title").getAsString(), content = given.get("content").getAsString();

        ApiClient client = new ApiClient();
        client.setBasePath(url);
        ArticlesApi articles = new ArticlesApi(client);
        SimilarApi similar = new SimilarApi(client);

        Health health = new ServiceApi(client).health();
        check(health.getStatus() == Health.StatusEnum.OK, "health: " + health);

        // Dedupe on ingest: a new article is stored (201) ...
        Article article = new Article().title(new Text(title)).content(new Text(content));
        article.putAdditionalProperty("published_at", "2026-11-23T08:00:00Z");
        ApiResponse<Stored> put = articles.putArticleWithHttpInfo(index, id, article, true, null, null, null, null, null);
        check(put.getStatusCode() == 201, "PUT ?dedupe=true of a new article: " + put.getStatusCode());
        check(put.getData().getResult() == Stored.ResultEnum.CREATED && index.equals(put.getData().getIndex()),
              "PUT answer: " + put.getData());

        // ... and a near copy of it is not: 409 `duplicate`, with the stored article among the matches.
        TextList parts = new TextList();
        parts.addAll(List.of("来源：青禾日报", content, "（责任编辑：张三）"));
        Article repost = new Article().title(new Text(title)).content(new Text(parts));
        try {
            articles.putArticle(index, id + "-repost", repost, true, null, null, null, null, null);
            check(false, "PUT ?dedupe=true of a near copy was stored");
        } catch (ApiException e) {
            ErrorResponse err = refused(e, 409);
            check(err.getError().getCode() == ErrorCode.DUPLICATE, "409 code: " + err);
            check(has(err.getMatches(), id), "409 matches lack " + id + ": " + err.getMatches());
            check(err.getRelation() == Relation.NEAR_DUPLICATE, "409 relation: " + err);
        }

        // Near-duplicates of a stored article, by id.
        Found byId = similar.similarById(index, "ex-003", null, null, null, null);
        check(has(byId.getMatches(), "ex-003-repost"), "similar by id: " + byId);
        check(byId.getQuery() == Found.QueryEnum.STORED && byId.getMethod() == Found.MethodEnum.MINHASH,
              "similar by id: " + byId);

        // Near-duplicates of an article, by its text (its stored copy among them).
        Found byArticle = similar.similarByArticle(index, article, 0.5, null, null, null);
        check(has(byArticle.getMatches(), id) && byArticle.getQuery() == Found.QueryEnum.COMPUTED,
              "similar by article: " + byArticle);
        check(byArticle.getThreshold() == 0.5, "similar by article, threshold: " + byArticle);

        // The refused near copy was not stored: 404 `not_found`.
        try {
            similar.similarById(index, id + "-repost", null, null, null, null);
            check(false, "similar of the refused near copy answered");
        } catch (ApiException e) {
            check(refused(e, 404).getError().getCode() == ErrorCode.NOT_FOUND, "404 code");
        }

        // Fingerprints: `u64` above 2^63 - 1 for about half of the articles, read as BigInteger.
        FingerprintRecord fp = new FingerprintApi(client).fingerprint(article);
        check(fp.getSimhash() != null && fp.getMinhash().size() == 128, "fingerprint: " + fp);
        check(fp.getU64().equals(new BigInteger(fp.getSimhash(), 16)), "fingerprint u64: " + fp);

        // Many articles in one request (`{"articles": [...]}`): a near copy is refused on its
        // own (409 naming the stored article), and written without dedupe (201).
        BulkArticle copy = new BulkArticle().id(id + "-bulk").title(new Text(title)).content(new Text(parts));
        BulkResult bulk = articles.bulkArticles(index, new BulkArticles().addArticlesItem(copy), true, null, null, null, null, null);
        BulkItem item = bulk.getItems().get(0);
        check(bulk.getErrors() && item.getStatus() == 409 && (id + "-bulk").equals(item.getId()), "bulk item: " + item);
        check(item.getError().getCode() == ErrorCode.DUPLICATE && has(item.getMatches(), id), "bulk 409: " + item);
        bulk = articles.bulkArticles(index, new BulkArticles().addArticlesItem(copy), false, null, null, null, null, null);
        check(!bulk.getErrors() && bulk.getItems().get(0).getStatus() == 201, "bulk without dedupe: " + bulk);

        // Relations: a stored lead excerpt of the article is a match the article `contains` (at
        // a threshold above their similarity), and is none with `containment=false`.
        JsonObject lead = JsonParser.parseString(args[3]).getAsJsonObject();
        Article excerpt = new Article().title(new Text(lead.get("title").getAsString()))
            .content(new Text(lead.get("content").getAsString()));
        ApiResponse<Stored> putLead = articles.putArticleWithHttpInfo(index, id + "-lead", excerpt, null, null, null, null, null, null);
        check(putLead.getStatusCode() == 201, "PUT of the lead: " + putLead.getStatusCode());
        Found related = similar.similarById(index, id, 0.9, null, null, null);
        Match contained = related.getMatches().stream().filter(m -> (id + "-lead").equals(m.getId())).findFirst().orElse(null);
        check(contained != null && contained.getRelation() == Relation.CONTAINS && contained.getContainment() >= 0.7,
              "similar by id, the lead contained: " + related);
        related = similar.similarById(index, id, 0.9, null, false, null);
        check(!has(related.getMatches(), id + "-lead"), "similar by id, containment=false: " + related);

        System.out.println("java: " + checks + " passed, 0 failed");
    }
}
