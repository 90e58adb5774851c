//! The news templates of `template_instances` and `template_repost`: written for the
//! benchmark (no corpus text), in a small language:
//!
//! - `{slot}` is filled anew at each occurrence, `{slot#k}` once per instance for each `k`
//!   (the same person named twice); the slots are listed in `Generator::fill`;
//! - `[…]` is optional (kept half of the time);
//! - `(a|b|c)` is one of its alternatives; `(@k a|b)` takes the alternative of the same
//!   index at every choice marked `@k` in the instance (up or down, throughout);
//! - everything else is fixed text, `\n` a paragraph break.
//!
//! ASCII `()[]{}|@#` are the syntax; the text itself uses full-width punctuation.

/// A template: its headline and its body.
pub(super) struct Template {
    pub title: &'static str,
    pub body: &'static str,
}

/// A family of templates: one kind of formula news, several ways of writing it.
pub(super) struct Family {
    pub name: &'static str,
    pub templates: &'static [Template],
}

/// The families, in the order of [`super::TEMPLATE_FAMILIES`].
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "daily_statistics",
        templates: &[
            Template {
                title: "{city#k}{mdate}客流数据：发送旅客{bignum#b}人次",
                body: "{org#o}{date}发布{city#k}(客运|旅客运输)数据：全市发送旅客{bignum#b}人次，同比(增长|下降){pct}。其中铁路{bignum}人次，公路{bignum}人次，民航{bignum}人次[，水路{bignum}人次]。\n\
{station}、{station}、{station}客流较为集中[，高峰时段每小时(进站|到达)旅客{bignum}人次]。\n\
(城市公交方面|市内交通方面)，地铁运送乘客{dec}万人次，公交{dec}万人次[，出租车{bignum}车次]。\n\
[{org#o}{person}提醒，](市民|旅客)出行前可通过{org#o}(查询|了解)实时(客流|路况)信息。",
            },
            Template {
                title: "{city#k}{mdate}空气质量日报：AQI {num#a}",
                body: "{org#o}{date}发布{city#k}空气质量日报。(当日|昨日)全市AQI为{num#a}，首要污染物为{pollutant}，空气质量{airlevel}。\n\
{place}、{place}点位AQI最高，分别为{num}和{num}；{place}点位最低，为{num}。\n\
PM2.5(平均浓度|日均浓度)为{num}微克/立方米，同比(上升|下降){pct}；PM10日均浓度为{num}微克/立方米[；臭氧浓度为{num}微克/立方米]。\n\
[{year}年以来，{city#k}优良天数累计{num3}天，占比{pct}。]预计{mdate_next}{city#k}空气质量{airlevel}[，{org}提醒易感人群减少户外活动]。",
            },
            Template {
                title: "{date}{city#k}主要农产品价格监测日报",
                body: "据{org#o}{date}监测，{city#k}{num}个(农贸市场|监测点)农产品价格(总体平稳|小幅波动)。\n\
(标准粉|大米)每公斤{price}，{oil}每升{price}；{vegetable}每公斤{price}，环比(上涨|下跌){pct}；{vegetable}每公斤{price}，环比(上涨|下跌){pct}[；{vegetable}每公斤{price}]。\n\
猪肉每公斤{price}，鸡蛋每公斤{price}[，牛肉每公斤{price}]。\n\
[{org#o}{person}介绍，近期{place}等地蔬菜集中上市，供应充足。]{org#o}将(继续|持续)加强价格监测。",
            },
        ],
    },
    Family {
        name: "meeting_notice",
        templates: &[
            Template {
                title: "关于召开{year}年{topic#t}工作会议的通知",
                body: "各(区县|有关单位|成员单位)、{org}：\n\
(经研究|经{org}研究)，(决定|定于){date_later}召开{year}年{topic#t}工作会议，现将有关事项通知如下：\n\
一、会议时间：{date_later}{time}[，会期{level}天]。\n\
二、会议地点：{place}{venue}。\n\
三、参会人员：{org}(分管负责同志|主要负责人)，{org}(有关处室|相关科室)负责人[，{org}联络员]。\n\
四、会议内容：(传达学习|贯彻落实){org}有关会议精神，总结{topic#t}工作，部署(下一阶段|今年)重点任务[，{person}同志作工作报告]。\n\
五、有关要求：请参会人员于{time}前(到达会场|签到)[，会议期间请将手机调至静音状态]。联系人：{person}，{phone}。\n\
{org}\n\
{date}",
            },
            Template {
                title: "{org#o}关于举办{topic#t}研讨会的通知",
                body: "为(深入|进一步)(推进|探讨){topic#t}(工作|研究)，(促进|加强)(学术交流|经验交流)，{org#o}(定于|拟于){date_later}在{place}举办{topic#t}研讨会。(现将有关事项通知如下|有关事项通知如下)：\n\
(会议|研讨会)时间为{date_later}{time}至{time}，(报到|签到)地点为{place}{venue}。(会议|研讨会)将邀请{org}{person}(教授|研究员)、{org}{person}(主任|院长)等(专家学者|嘉宾)作主题报告[，并设{level}个分论坛]。\n\
请各单位(高度重视|认真组织)，(按时|准时)参会。[请于{date_next}前将参会回执(发送至|报送至)会务组邮箱{email}。]会务联系人：{person}，电话{phone}。\n\
{org#o}\n\
{date}",
            },
            Template {
                title: "{city#k}人大常委会第{num#n}次会议{mdate_later}召开",
                body: "{city#k}第{num}届人大常委会第{num#n}次会议(决定|定于){date_later}在{place}{venue}召开。\n\
会议(建议议程|主要议程)：审议{org}关于{topic}工作情况的报告；审议{org}关于{topic}情况的报告；审议{org}关于{topic}的议案[；审议有关人事任免事项]。\n\
[会议将由常委会主任{person}主持，副主任{person}、{person}出席。]\n\
请各位委员准时出席[，因故不能出席的请于{date_next}前向{org}请假]。联系人：{person}，电话：{phone}。\n\
{city#k}人大常委会办公厅\n\
{date}",
            },
        ],
    },
    Family {
        name: "weather_forecast",
        templates: &[
            Template {
                title: "{city#k}气象台{mdate}{time}发布天气预报",
                body: "{city#k}气象台{date}{time}发布天气预报：(今天|今日)白天{weather}，{wind}{level}级，最高气温{thigh}℃；夜间{weather}，{wind}{level}级，最低气温{tlow}℃。\n\
明天（{mdate_next}）{weather}，{tlow}～{thigh}℃；后天（{mdate_after}）{weather}，{tlow}～{thigh}℃。\n\
{place}、{place}等地{weather}[，{place}局部有{weather}]。\n\
[受{system}影响，后天起{city#k}将有一次(降温|降雨|大风)过程，(降温幅度|累计降水量)可达{num}(℃|毫米)。]\n\
气象部门提醒，(近期|未来几天)早晚温差较大，(市民|公众)注意适时增减衣物，出行注意交通安全。",
            },
            Template {
                title: "{city#k}{mdate}天气：{weather#w} {tlow#l}℃至{thigh#h}℃",
                body: "(据|根据){city#k}气象台预报，{mdate}{city#k}以{weather#w}为主，气温{tlow#l}℃至{thigh#h}℃，{wind}{level}到{level}级。{place}、{place}等地有{weather}[，局部(伴有|可能出现)雷电、短时强降水]。\n\
(未来三天|未来几天)具体预报如下：{mdate_next}{weather}，{tlow}～{thigh}℃；{mdate_after}{weather}，{tlow}～{thigh}℃。\n\
(主要城镇|各地)气温：{place}{tlow}～{thigh}℃，{place}{tlow}～{thigh}℃。\n\
[首席预报员{person}(介绍|表示)，{system}将影响{city#k}。]气象部门(提醒|建议)公众关注最新(天气预报|预警)信息，合理安排生产生活。",
            },
            Template {
                title: "{org#o}发布{mdate}至{mdate_later}天气趋势预报",
                body: "{date}，{org#o}发布天气(趋势|预报)：{mdate}至{mdate_later}，{city#k}以{weather}天气为主，平均气温{tlow}℃左右，较常年同期(偏高|偏低){level}℃。\n\
{mdate_next}{place}、{place}有{weather}，{place}可能出现(大雾|霜冻|强降水)[，能见度不足{bignum}米]。{mdate_after}{city#k}{weather}，{tlow}～{thigh}℃。\n\
总体来看，(假期|这段时间)天气条件(较好|总体较好)，适宜出行[，{place}、{place}等景区天气条件(较好|适宜)]。{org#o}提醒，(驾车出行|外出旅游)的(市民|游客)请留意{org}发布的最新信息。",
            },
        ],
    },
    Family {
        name: "stock_close",
        templates: &[
            Template {
                title: "{mdate}A股收评：沪指报{index#s}点 两市成交{amount#v}",
                body: "{date}，A股三大指数(@d 集体收涨|集体收跌)。截至收盘，上证指数报{index#s}点，(@d 涨|跌){pct}；深证成指报{index}点，(@d 涨|跌){pct}；创业板指报{index}点，(@d 涨|跌){pct}。沪深两市全天成交额{amount#v}[，较上一交易日(放量|缩量){amount}]。\n\
(盘面上|板块方面)，{sector}、{sector}板块(涨幅居前|表现活跃)，{sector}、{sector}板块(跌幅居前|走势低迷)。个股方面，{company}(涨停|大涨{pct})，{company}(跌停|下跌{pct})。[北向资金全天净(买入|卖出){amount}。]\n\
[{org}分析师{person}(认为|表示)，(短期|后市)市场(仍将|或将)(震荡|维持震荡格局)，建议投资者(关注|留意){sector}板块的(机会|投资机会)。]",
            },
            Template {
                title: "港股{mdate}收市：恒指(@d 涨|跌){index2#c}点 报{index#h}点",
                body: "(港股|香港股市){date}(收盘|收市)，恒生指数(@d 上涨|下跌){index2#c}点，(@d 涨幅|跌幅)为{pct}，(收报|报收){index#h}点；国企指数(@d 上涨|下跌){index2}点，收报{index}点[；恒生科技指数(@d 涨|跌){pct}]。大市成交额{dec}亿港元。\n\
(蓝筹股|权重股)方面，{company}(@d 涨|跌){pct}，{company}(@d 涨|跌){pct}[，{company}(@d 涨|跌){pct}]。(行业板块|板块)方面，{sector}(股|板块)(走强|表现突出)，{sector}(股|板块)(走弱|表现疲弱)。\n\
[{org}(指出|认为)，外围市场仍存在不确定性，(港股|市场)短期(或|可能)维持(震荡|区间震荡)。](市场人士|分析人士)建议投资者(控制仓位|理性投资)。",
            },
            Template {
                title: "{mdate}两市(@d 普涨|普跌) {sector#s}板块(@d 领涨|领跌)",
                body: "{weekday}A股(@d 高开高走|低开低走)，(截至|至)收盘，沪指(@d 涨|跌){pct}报{index}点，深成指(@d 涨|跌){pct}报{index}点。两市上涨个股{bignum}只，下跌个股{bignum}只[，{num}只个股涨停]。两市合计成交{amount}[，{org}数据显示，主力资金净(流入|流出){amount}]。\n\
(行业|概念)板块中，{sector#s}板块(@d 领涨|领跌)，{company}、{company}等(@d 涨停|跌停)；{sector}板块(@d 跌幅居前|涨幅居前)。\n\
[{company}晚间公告称，(拟|计划)投资{amount}在{place}建设(生产基地|研发中心)。]",
            },
        ],
    },
    Family {
        name: "admission_notice",
        templates: &[
            Template {
                title: "{univ#u}{year}年本科招生录取结果查询通知",
                body: "{univ#u}{year}年本科招生录取工作(已|现已)结束，学校在{num}个省份共录取新生{bignum}人，其中{place}录取{bignum}人，{place}录取{bignum}人。\n\
考生可登录{univ#u}招生网或拨打{phone}查询录取结果。录取通知书(将于|已于){mdate}起通过EMS寄出。\n\
新生报到时间为{mdate_later}，地点为{place}校区{venue}[，学校将在{station}设立迎新点]。\n\
[招生办主任{person}提醒，学校不会委托任何机构或个人招生，谨防诈骗。]",
            },
            Template {
                title: "{univ#u}{year}年(@k 强基计划|高水平运动队|艺术类专业)招生简章发布",
                body: "(根据|按照)教育部有关文件精神，{univ#u}{year}年(@k 强基计划|高水平运动队|艺术类专业)招生简章(现已|日前)发布。\n\
学校计划在{num}个专业招收学生{bignum}名，(包括|涉及){major}、{major}、{major}、{major}等专业[，其中{place}计划招收{num}名]。\n\
报名时间为{mdate}至{mdate_later}，考生须登录{org}报名系统填报申请。\n\
[学校将于{mdate_later}在{place}校区{venue}组织校测，考核包括{major}笔试和面试。]\n\
咨询电话：{phone}[；电子邮箱：{email}]。",
            },
            Template {
                title: "{univ#u}公布{year}年硕士研究生复试分数线",
                body: "{univ#u}{date}公布{year}年硕士研究生复试分数线。其中，{major}专业总分不低于{num3}分，{major}专业总分不低于{num3}分，{major}专业总分不低于{num3}分[，{major}专业单科不低于{num}分]。\n\
复试(将于|定于){mdate_later}在{place}校区{venue}举行，(采取|采用)(线上|现场)方式。\n\
学校今年计划招收研究生{bignum}名，其中推免生{bignum}名[，{org}名额{num}名]。\n\
[研究生院{person}提醒，考生须于{mdate_next}前登录{org}系统确认复试。]",
            },
        ],
    },
    Family {
        name: "ipo_notice",
        templates: &[
            Template {
                title: "{company#c}{mdate}在(@x 上交所|深交所)挂牌上市",
                body: "{date}，{company#c}（股票代码：{code}）在(@x 上海证券交易所|深圳证券交易所)挂牌上市。\n\
公司本次发行新股{bignum}万股，发行价每股{price}，募集资金{amount}。上市首日股价(高开|大涨){pct}[，收报{price}]。\n\
{company#c}成立于{year0}年，总部位于{place}，主要从事{sector}产品研发、生产和销售[，{year}年营业收入{amount}]。\n\
[董事长{person}在上市仪式上表示，公司将以上市为新起点，加大研发投入。]保荐机构为{org}。",
            },
            Template {
                title: "{company#c}发布招股意向书 拟募资{amount#m}",
                body: "{company#c}{date}(发布|披露)招股意向书，(拟|计划)在(创业板|科创板|中小板)上市，拟发行不超过{bignum}万股，募集资金{amount#m}，(主要用于|将用于){place}{sector}项目建设及补充流动资金。\n\
(网上申购日|申购日)为{mdate_later}，申购代码为{code}[，单一账户申购上限为{bignum}股]。\n\
招股书显示，{year}年公司营业收入{amount}，净利润{amount}[，同比增长{pct}]。\n\
[{company#c}实际控制人为{person}，持股比例{pct}。]保荐机构为{org}。",
            },
            Template {
                title: "{company#c}今日登陆港交所 首日(@d 上涨|下跌){pct#g}",
                body: "{company#c}{date}在香港联合交易所(主板|)挂牌上市，股份代号{code5}。(公司|该公司)本次全球发售{bignum}万股(股份|H股)，每股发售价{price2}港元，(所得款项净额|募资净额)约{dec}亿港元。[香港公开发售部分获超额认购{num}倍。]\n\
(首日|上市首日)(开盘|收盘)报{price2}港元，较发售价(@d 上涨|下跌){pct#g}。\n\
{company#c}是{place}(一家|知名的){sector}企业，于{year0}年(创立|成立)[，创始人为{person}]。(联席保荐人|保荐人)为{org}和{org}。",
            },
        ],
    },
    Family {
        name: "traffic_notice",
        templates: &[
            Template {
                title: "关于{road#r}施工期间实施交通管制的通告",
                body: "因{road#r}(改造|维修|管网)工程施工需要，(根据|依据)《道路交通安全法》有关规定，{city#k}公安局交通警察支队决定对{road#r}（{road}至{road}段）实施交通管制：\n\
一、{date_next}{time}至{date_later}{time}，{road#r}上述路段禁止机动车通行[，非机动车和行人在施工区域外侧通行]。\n\
二、(过往|途经)车辆可经{road}、{road}、{road}绕行。\n\
三、{num}路、{num}路、{num}路等公交线路临时调整[，具体以{org}公告为准]。\n\
特此通告。\n\
{city#k}公安局交通警察支队\n\
{date}",
            },
            Template {
                title: "{year}{city#k}马拉松{mdate_later}开跑 部分道路临时交通管制",
                body: "{year}{city#k}马拉松(将于|定于){date_later}{time}在{place}鸣枪开跑。为保障赛事顺利进行，{city#k}公安局交通警察支队将于{mdate_later}{time}至{time}对赛事沿线道路实施(分时段|临时)交通管制。\n\
管制道路包括{road}、{road}、{road}、{road}[和{road}]等路段。管制期间，{num}路、{num}路等{num}条公交线路临时绕行[，地铁{level}号线提前至{time}运营]。\n\
(请|提醒)(广大市民|驾驶人)提前规划出行路线。咨询电话：{phone}。",
            },
            Template {
                title: "{city#k}{date_next}起实施工作日高峰时段区域限行",
                body: "{city#k}人民政府(决定|研究决定)自{date_next}起(继续|)实施工作日高峰时段区域限行措施。\n\
限行时段为{time}至{time}、{time}至{time}，限行区域为{road}、{road}、{road}、{road}围合区域[，{road}、{road}不在限行范围内]。\n\
每日限行两个尾号，{mdate_next}限行尾号为{level}和{level}。违反规定的，(公安交管部门|交警部门)将处以罚款{num3}元。{org}提醒市民(绿色出行|多乘坐公共交通)。",
            },
        ],
    },
    Family {
        name: "personnel_notice",
        templates: &[
            Template {
                title: "{city#k}市管干部任前公示",
                body: "根据《党政领导干部选拔任用工作条例》有关规定，经{city#k}委研究，现将拟任职干部情况(予以公示|公示如下)：\n\
{person}，(男|女)，{year0}年{month}月生，{place}人，(大学|研究生)学历，现任{org}{position}，拟任{org}{position}。\n\
{person}，(男|女)，{year0}年{month}月生，{place}人，(大学|研究生)学历，现任{place}{position}，拟任{place}{position}。\n\
公示期间，(个人|单位)可通过来电、来信等方式反映公示对象的有关情况和问题。公示时间：{mdate}至{mdate_later}。举报电话：{phone}。\n\
中共{city#k}委组织部\n\
{date}",
            },
            Template {
                title: "{org#o}主要负责同志职务调整",
                body: "{date}，{org#o}(召开|举行)干部大会，宣布{org}关于{org#o}主要负责同志职务调整的决定：{person#p}同志任{org#o}{position}[，{person}同志不再担任{org#o}{position}职务]。{org}{position}{person}出席会议并讲话。\n\
会议要求，领导班子要(团结协作|团结一致)，确保各项工作平稳有序推进。[{person#p}表示，坚决拥护组织决定，尽快熟悉情况，切实履行职责。]\n\
(资料显示|据公开简历)，{person#p}现年{num}岁，{place}人，曾任{place}{position}、{org}{position}、{org}{position}等职。",
            },
            Template {
                title: "{org#o}{year}年公开招聘拟聘用人员公示",
                body: "(根据|依据){year}年{city#k}事业单位公开招聘工作安排，经考试、考察和体检，(现将|拟将){org#o}拟聘用人员名单(予以公示|公示如下)：\n\
{person}（(男|女)，{major}专业，准考证号{code}）；\n\
{person}（(男|女)，{major}专业，准考证号{code}）[；\n\
{person}（(男|女)，{major}专业，准考证号{code}）]。\n\
公示期为{mdate}至{mdate_later}[，共{level}个工作日]。对拟聘人员有异议的，(请|可)(以书面形式|实名)向{org}反映。联系电话：{phone}。",
            },
        ],
    },
];
